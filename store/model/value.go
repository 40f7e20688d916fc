package model

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"dataservice/internal/clip"
)

// Dataformats a field may have. "secret" is hashed on write and never leaves the store.
var dataformats = map[string]bool{
	"string": true, "text": true, "int": true, "float": true, "boolean": true, "date": true,
	"datetime": true, "ipv4": true, "schema": true, "user": true, "group": true, "enumerate": true,
	"external": true, "secret": true,
}

var (
	schemaNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,127}$`)
	fieldNameRE  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,127}$`)
)

// errUnresolved marks a value that references an object that does not exist (yet):
// the loader retries such entries in its second pass.
type errUnresolved struct{ msg string }

func (e *errUnresolved) Error() string { return e.msg }

// Unwrap exposes the error as an invalid-value *Error to callers outside the loader.
func (e *errUnresolved) Unwrap() error { return &Error{Code: EInvalid, Message: e.msg} }

func IsUnresolved(err error) bool {
	var u *errUnresolved
	return errors.As(err, &u)
}

// CheckKeyname validates an instance keyname: non-empty, at most 256 characters,
// valid UTF-8, no whitespace or control characters.
func CheckKeyname(k string) error {
	if k == "" {
		return Errorf(EInvalid, "keyname is empty")
	}
	if !utf8.ValidString(k) {
		return Errorf(EInvalid, "keyname is not valid UTF-8")
	}
	if utf8.RuneCountInString(k) > 256 {
		return Errorf(EInvalid, "keyname is longer than 256 characters")
	}
	for _, r := range k {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return Errorf(EInvalid, "keyname %s contains whitespace or a control character", clip.Quote(k))
		}
		// Format characters (bidi overrides, zero-width joiners and spaces) make two
		// different keynames look the same, or one look like another.
		if unicode.Is(unicode.Cf, r) {
			return Errorf(EInvalid, "keyname %s contains an invisible format character (U+%04X)", clip.Quote(k), r)
		}
	}
	return nil
}

// BoolWord reads a boolean word: true for true yes on 1, false for false no off 0 and
// the empty string (case-insensitive); ok is false for anything else.
func BoolWord(s string) (v, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "yes", "on", "1":
		return true, true
	case "false", "no", "off", "0", "":
		return false, true
	}
	return false, false
}

// ScalarText renders a scalar value as text; ok is false for lists and maps.
func ScalarText(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", true
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case int:
		return strconv.Itoa(x), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case json.Number:
		return x.String(), true
	}
	return "", false
}

// IsMulti reports whether the field holds a list.
func (f *Field) IsMulti() bool { return f.CardinalMax != 1 }

// normalize validates raw for the field and returns the value to store; present is
// false when the value is empty (the field is then removed from the instance).
func (f *Field) Normalize(raw any, refs RefResolver) (val any, present bool, err error) {
	if f.Dataformat == "external" {
		return nil, false, nil
	}
	if !f.IsMulti() {
		if l, ok := raw.([]any); ok {
			switch len(l) {
			case 0:
				raw = nil
			case 1:
				raw = l[0]
			default:
				return nil, false, Errorf(EInvalid, "field %s: takes one value, got %d", f.Keyname, len(l))
			}
		}
		if raw == nil {
			return nil, false, nil
		}
		v, ok, err := f.normalizeOne(raw, refs)
		return v, ok, err
	}
	var items []any
	switch x := raw.(type) {
	case nil:
	case []any:
		items = x
	case string:
		for _, p := range strings.Split(x, ",") {
			items = append(items, p)
		}
	default:
		items = []any{x}
	}
	out := make([]any, 0, len(items))
	for _, it := range items {
		if s, ok := it.(string); ok {
			it = strings.TrimSpace(s)
		}
		v, ok, err := f.normalizeOne(it, refs)
		if err != nil {
			return nil, false, err
		}
		if ok {
			out = append(out, v)
		}
	}
	if f.CardinalMax > 1 && len(out) > f.CardinalMax {
		return nil, false, Errorf(EInvalid, "field %s: takes at most %d values, got %d", f.Keyname, f.CardinalMax, len(out))
	}
	if len(out) == 0 {
		return nil, false, nil
	}
	return out, true, nil
}

func (f *Field) invalid(format string, args ...any) error {
	return Errorf(EInvalid, "field %s: "+format, append([]any{f.Keyname}, args...)...)
}

func (f *Field) normalizeOne(raw any, refs RefResolver) (any, bool, error) {
	if _, ok := raw.(map[string]any); ok {
		return nil, false, f.invalid("a mapping is not a valid %s value", f.Dataformat)
	}
	if _, ok := raw.([]any); ok {
		return nil, false, f.invalid("a list is not a valid %s value", f.Dataformat)
	}
	text, _ := ScalarText(raw)
	if !utf8.ValidString(text) {
		return nil, false, f.invalid("value is not valid UTF-8")
	}
	// PostgreSQL can neither store a NUL in text nor read \u0000 in JSON as jsonb, so
	// no engine takes one (a value a pipeline rule computes comes through here too).
	if strings.ContainsRune(text, 0) {
		return nil, false, f.invalid("%s", nulText)
	}
	switch f.Dataformat {
	case "string", "text", "secret":
		if text == "" {
			return nil, false, nil
		}
		if f.Dataformat == "text" {
			if err := checkTextExt(f.DataformatExt, text); err != nil {
				return nil, false, f.invalid("%v", err)
			}
		}
		if f.Dataformat == "secret" && f.DataformatExt == SecretEncrypted {
			// Sealed by the store with its key when written (store.sealSecrets): the key
			// is not the model's to hold. A sealed value given as is stays as it is.
			limit := MaxEncryptedSecret
			if strings.HasPrefix(text, SealedPrefix) {
				limit = len(SealedPrefix) + base64.StdEncoding.EncodedLen(12+MaxEncryptedSecret+16) // nonce, tag
			}
			if len(text) > limit {
				return nil, false, f.invalid("an encrypted secret holds at most %d bytes", MaxEncryptedSecret)
			}
			return text, true, nil
		}
		if f.Dataformat == "secret" {
			if err := checkHashText(text); err != nil {
				return nil, false, f.invalid("%s", err.Error())
			}
			if !IsSecretHash(text) {
				return HashSecret(text), true, nil
			}
		}
		if _, isText := raw.(string); isText {
			return raw, true, nil // the same string: boxing it again would allocate
		}
		return text, true, nil
	case "boolean":
		if b, ok := raw.(bool); ok {
			return b, true, nil
		}
		b, ok := BoolWord(text)
		if !ok {
			return nil, false, f.invalid("%s is not a boolean", clip.Quote(text))
		}
		return b, true, nil
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, false, nil
	}
	switch f.Dataformat {
	case "int":
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			fl, ferr := parseFloatText(text)
			if ferr != nil {
				// YAML's other integer forms, kept as text by the loader: 0x1F, 0o17, 0b101, 1_000.
				if n2, err2 := strconv.ParseInt(strings.ReplaceAll(text, "_", ""), 0, 64); err2 == nil {
					fl, ferr = float64(n2), nil
				}
			}
			if ferr != nil || fl != math.Trunc(fl) || math.Abs(fl) > 1<<53 {
				return nil, false, f.invalid("%s is not an integer", clip.Quote(text))
			}
			n = int64(fl)
		}
		if err := checkBounds(f.DataformatExt, float64(n)); err != nil {
			return nil, false, f.invalid("%d %v", n, err)
		}
		return n, true, nil
	case "float":
		fl, err := parseFloatText(text)
		if err != nil {
			if n2, err2 := strconv.ParseInt(strings.ReplaceAll(text, "_", ""), 0, 64); err2 == nil {
				fl, err = float64(n2), nil
			}
		}
		if err != nil || math.IsNaN(fl) || math.IsInf(fl, 0) {
			return nil, false, f.invalid("%s is not a number", clip.Quote(text))
		}
		if err := checkBounds(f.DataformatExt, fl); err != nil {
			return nil, false, f.invalid("%v %v", fl, err)
		}
		return fl, true, nil
	case "date":
		if _, err := time.Parse("2006-01-02", text); err != nil {
			return nil, false, f.invalid("%s is not a date (YYYY-MM-DD)", clip.Quote(text))
		}
		return text, true, nil
	case "datetime":
		t, err := time.Parse("2006-01-02T15:04:05", strings.Replace(text, " ", "T", 1))
		if err != nil {
			return nil, false, f.invalid("%s is not a datetime (YYYY-MM-DDTHH:MM:SS)", clip.Quote(text))
		}
		return t.Format("2006-01-02T15:04:05"), true, nil
	case "ipv4":
		if err := CheckIPv4(text, f.DataformatExt); err != nil {
			return nil, false, f.invalid("%v", err)
		}
		return text, true, nil
	case "user", "group":
		if err := CheckKeyname(text); err != nil {
			return nil, false, f.invalid("%s is not a valid %s name", clip.Quote(text), f.Dataformat)
		}
		return text, true, nil
	case "schema":
		if err := CheckKeyname(text); err != nil {
			return nil, false, f.invalid("%s is not a valid keyname", clip.Quote(text))
		}
		target := strings.Fields(f.DataformatExt)
		if len(target) == 0 {
			return nil, false, f.invalid("no target schema in dataformat_ext")
		}
		if refs == nil {
			return text, true, nil
		}
		ok, err := refs.InstanceExists(target[0], text)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			return nil, false, &errUnresolved{fmt.Sprintf("field %s: no %s instance %s", f.Keyname, target[0], clip.Quote(text))}
		}
		return text, true, nil
	case "enumerate":
		if refs == nil {
			return text, true, nil
		}
		values, err := refs.EnumValues(strings.TrimSpace(f.DataformatExt))
		if err != nil {
			return nil, false, err
		}
		if values == nil {
			return nil, false, &errUnresolved{fmt.Sprintf("field %s: no enumerate %s", f.Keyname, clip.Quote(f.DataformatExt))}
		}
		if !values[text] {
			return nil, false, f.invalid("%s is not a value of enumerate %s", clip.Quote(text), f.DataformatExt)
		}
		return text, true, nil
	}
	return nil, false, f.invalid("unknown dataformat %s", clip.Quote(f.Dataformat))
}

func checkTextExt(ext, text string) error {
	switch strings.TrimSpace(ext) {
	case "json":
		if !json.Valid([]byte(text)) {
			return fmt.Errorf("not valid JSON")
		}
	case "yaml":
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(text), &n); err != nil {
			return fmt.Errorf("not valid YAML: %v", err)
		}
	}
	return nil
}

// checkBounds applies dataformat_ext bounds such as "gte_1 lte_4094".
func checkBounds(ext string, v float64) error {
	for _, w := range strings.Fields(ext) {
		op, num, ok := strings.Cut(w, "_")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(num, 64)
		if err != nil {
			continue
		}
		var bad bool
		switch op {
		case "gt":
			bad = !(v > n)
		case "gte":
			bad = !(v >= n)
		case "lt":
			bad = !(v < n)
		case "lte":
			bad = !(v <= n)
		default:
			continue
		}
		if bad {
			return fmt.Errorf("is out of bounds (%s)", w)
		}
	}
	return nil
}

// CheckIPv4 validates an ipv4 value: a dotted quad in canonical form, or with ext
// "subnet" a CIDR, or with "subnet strict" an aligned CIDR (no host bits set).
func CheckIPv4(s, ext string) error {
	words := strings.Fields(ext)
	subnet, strict := false, false
	for _, w := range words {
		switch w {
		case "subnet":
			subnet = true
		case "strict":
			strict = true
		}
	}
	if !subnet {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() || a.String() != s {
			return fmt.Errorf("%s is not an IPv4 address", clip.Quote(s))
		}
		return nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() || p.String() != s {
		return fmt.Errorf("%s is not an IPv4 subnet (A.B.C.D/N)", clip.Quote(s))
	}
	if strict && p.Masked() != p {
		return fmt.Errorf("%s has host bits set (expected %s)", clip.Quote(s), p.Masked())
	}
	return nil
}

// HexIP returns the hexip keyname of a dotted IPv4 address: 8 lowercase hex digits in
// network byte order.
func HexIP(dotted string) (string, error) {
	a, err := netip.ParseAddr(dotted)
	if err != nil || !a.Is4() || a.String() != dotted {
		return "", Errorf(EInvalid, "%s is not an IPv4 address", clip.Quote(dotted))
	}
	b := a.As4()
	return fmt.Sprintf("%02x%02x%02x%02x", b[0], b[1], b[2], b[3]), nil
}

// IsDottedIPv4 reports whether s is a canonical dotted IPv4 address.
func IsDottedIPv4(s string) bool {
	_, err := HexIP(s)
	return err == nil
}

// parseFloatText parses a decimal number, also in YAML's spelling with digit
// separators (1_000.5), which the loader keeps as text.
func parseFloatText(text string) (float64, error) {
	fl, err := strconv.ParseFloat(text, 64)
	if err != nil && strings.Contains(text, "_") {
		fl, err = strconv.ParseFloat(strings.ReplaceAll(text, "_", ""), 64)
	}
	return fl, err
}

// ValidSchemaName reports whether name may name a schema.
func ValidSchemaName(name string) bool { return schemaNameRE.MatchString(name) }

// ValidFieldName reports whether name may name a field (or a column a query names).
func ValidFieldName(name string) bool { return fieldNameRE.MatchString(name) }

// RefResolver answers the lookups value validation needs (the store answers them
// from the database).
type RefResolver interface {
	// InstanceExists reports whether an instance cls/key exists.
	InstanceExists(cls, key string) (bool, error)
	// EnumValues returns the values of an _enumerate instance, or nil when it is missing.
	EnumValues(name string) (map[string]bool, error)
}

// IsHexIP reports whether s is a hexip keyname: 8 lowercase hex digits.
func IsHexIP(s string) bool {
	if len(s) != 8 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// dottedOfHex is the dotted IPv4 address of a hexip keyname (8 lowercase hex digits).
func dottedOfHex(h string) string {
	n, _ := strconv.ParseUint(h, 16, 32)
	return fmt.Sprintf("%d.%d.%d.%d", n>>24, n>>16&255, n>>8&255, n&255)
}

// nulText is why text holding a NUL character is refused: PostgreSQL's text cannot
// hold one, so neither engine stores one (the same data on both).
const nulText = "a NUL character is not allowed"
