package tasks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"dataservice/internal/netguard"
)

// Webhook request headers.
const (
	HeaderEvent     = "X-Dataservice-Event"
	HeaderSignature = "X-Dataservice-Signature"
)

// maxAnswerRead bounds how much of a receiver's answer is read: enough to keep its
// first words as the attempt's error, never a receiver's whole reply.
const maxAnswerRead = 4 << 10

// Signature is the X-Dataservice-Signature value of body sent at unix time t:
// "t=<t>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>", as GitHub's and Stripe's
// webhooks sign, so a receiver can refuse stale or replayed requests.
func Signature(secret []byte, t int64, body []byte) string {
	ts := strconv.FormatInt(t, 10)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// webhookClient posts event bodies. It connects only where the SSRF guard allows (on
// the address actually dialled), uses no proxy from the environment (a proxy would
// connect on our behalf to any address), and follows no redirect.
type webhookClient struct {
	c *http.Client
}

func newWebhookClient(allow func() *netguard.AllowList) *webhookClient {
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            netguard.DialContext(allow, 10*time.Second),
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           32,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &webhookClient{c: &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}
}

// post sends one attempt: the body as stored, signed at time now, within ctx's time
// bound. It returns the answer's status (0 when there was none) and, unless the
// status is 2xx, an error fit to be recorded: it never holds the secret, the
// signature or the URL (which may carry credentials).
func (w *webhookClient) post(ctx context.Context, target, id string, secret, body []byte, now time.Time) (int, error) {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return 0, errors.New("webhook_url is not an http:// or https:// URL")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("webhook_url is not a valid URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "dataservice-webhook")
	req.Header.Set(HeaderEvent, id)
	req.Header.Set(HeaderSignature, Signature(secret, now.Unix(), body))
	resp, err := w.c.Do(req)
	if err != nil {
		return 0, errors.New(transportError(ctx, err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerRead))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return resp.StatusCode, nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return resp.StatusCode, fmt.Errorf("answered %d: redirects are not followed", resp.StatusCode)
	}
	msg := fmt.Sprintf("answered %d", resp.StatusCode)
	if a := printable(answer, 200); a != "" {
		msg += ": " + a
	}
	return resp.StatusCode, errors.New(msg)
}

// transportError describes a failed request without the URL the http client's error
// names (it may hold credentials in its path or query).
func transportError(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return "timed out (WEBHOOK_TIMEOUT_SECONDS)"
	}
	var re *netguard.RefusedError
	if errors.As(err, &re) {
		return re.Error()
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "cannot resolve " + dnsErr.Name + ": " + dnsErr.Err
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Op + ": " + op.Err.Error()
	}
	return err.Error()
}

// printable is the first max runes of b with control characters replaced, for a
// one-line error.
func printable(b []byte, max int) string {
	var sb strings.Builder
	n := 0
	for len(b) > 0 && n < max {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		if r == utf8.RuneError || unicode.IsControl(r) {
			r = ' '
		}
		sb.WriteRune(r)
		n++
	}
	return strings.TrimSpace(sb.String())
}
