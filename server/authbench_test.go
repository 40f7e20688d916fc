package server_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/server"
	"dataservice/store"
	"dataservice/tasks"
)

// BenchmarkVerifiedKeyUnderAttack measures the requests of an API key verified before
// (p50, p99, requests per second, one request at a time from 127.0.0.1) in the same
// run and on the same server:
//
//   - floor: nobody else sends anything;
//   - one_address: four clients at 127.0.0.x hammer wrong key secrets and wrong
//     passwords for admin; the credential throttle answers 429 unchecked after the
//     address's 20th refusal;
//   - many_addresses: the same from a new loopback address every 19 attempts, so the
//     address limit never applies and every attempt costs a derivation (a distributed
//     guesser).
//
// derivations/s is how many derivations the attack cost the server meanwhile.
func BenchmarkVerifiedKeyUnderAttack(b *testing.B) {
	st := testkit.NewStack(b, testkit.StackOptions{AdminPassword: adminPassword, NoRunner: true,
		Handler: func(db *store.DB, runner *tasks.Runner) http.Handler {
			return server.New(server.Options{DB: db, Runner: runner, Logger: testkit.Logger(b, slog.LevelError),
				Version: testkit.Version, VersionDate: testkit.VersionDate})
		}})
	testkit.MustLoad(b, st.DB, `[{classname: _apikey, keyname: bench, secret: s3cret-bench, is_enabled: true,
		permissions: [p_data_access]}]`, store.LoadOptions{})
	var derivations atomic.Int64
	st.DB.SetDerivationHook(func(string) { derivations.Add(1) })
	url := st.Server.URL + "/api/pipelines/"
	send := func(c *http.Client, auth string) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", auth)
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	const good = "Bearer bench:s3cret-bench"
	client := &http.Client{Timeout: time.Minute}
	if s, err := send(client, good); s != http.StatusOK { // verified once: cached from now on
		b.Fatalf("verified key: %d %v", s, err)
	}
	wrong := []string{"Bearer bench:wrong-secret",
		"Basic " + base64.StdEncoding.EncodeToString([]byte("admin:wrong-password"))}

	var nextAddr atomic.Int64 // loopback addresses 127.0.x.y used so far, across runs
	newAddr := func() string {
		n := nextAddr.Add(1)
		return fmt.Sprintf("127.0.%d.%d", 1+n/250, 2+n%250)
	}
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: time.Minute}
	}
	for _, mode := range []string{"floor", "one_address", "many_addresses", "floor_again"} {
		b.Run(mode, func(b *testing.B) {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			attackers := 4
			if mode == "floor" || mode == "floor_again" {
				attackers = 0
			}
			one := newAddr()
			for a := range attackers {
				wg.Go(func() {
					ip := one
					c := from(ip)
					defer func() { c.CloseIdleConnections() }()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if mode == "many_addresses" && i%19 == 18 {
							c.CloseIdleConnections()
							c = from(newAddr())
						}
						send(c, wrong[(i+a)%2])
					}
				})
			}
			time.Sleep(100 * time.Millisecond) // the attack is under way
			d0 := derivations.Load()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			t0 := time.Now()
			for range b.N {
				s0 := time.Now()
				if s, err := send(client, good); s != http.StatusOK {
					b.Fatalf("verified key under attack: %d %v", s, err)
				}
				lat = append(lat, time.Since(s0))
			}
			elapsed := time.Since(t0)
			b.StopTimer()
			d := derivations.Load() - d0
			close(stop)
			wg.Wait()
			slices.Sort(lat)
			ms := func(q float64) float64 {
				return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / float64(time.Millisecond)
			}
			b.ReportMetric(ms(0.5), "p50-ms")
			b.ReportMetric(ms(0.99), "p99-ms")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
			b.ReportMetric(float64(d)/elapsed.Seconds(), "derivations/s")
		})
	}
}
