package bootstrap

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// versionRE is the shape of a code version: MAJOR.MINOR.PATCH (no leading zeros),
// alone or followed by "-" and a suffix of printable ASCII without spaces
// (4.9.0-RC1, 4.9.0-rc1, 4.9.0-RC1-hotfix). The suffix is stored in DB_VERSION, so it
// is bounded.
var versionRE = regexp.MustCompile(`^(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})(-[!-~]{1,` +
	strconv.Itoa(MaxVersionSuffix) + `})?$`)

// MaxVersionSuffix is the longest suffix after "MAJOR.MINOR.PATCH-" a code version may have.
const MaxVersionSuffix = 64

// MinVersion is the oldest stored version the migrations accept (the seed's first row).
const MinVersion = "4.0.0"

// CheckVersion reports whether v can be the code version (SERVICE_VERSION): it must be
// MAJOR.MINOR.PATCH, optionally followed by "-" and 1 to 64 printable ASCII characters
// without spaces, and not sort below 4.0.0 as text, since the last step writes it to
// DB_VERSION and the next start would then be refused. Whether it is a release
// candidate of a migration block is the seed's rule, applied as written: it starts
// with "<block>-RC" (4.9.0-RC1 is one, 4.9.0-rc1 is not).
func CheckVersion(v string) error {
	if !versionRE.MatchString(v) {
		// Quoted at most 80 characters long: the value may be anything.
		core, suffix, hasSuffix := strings.Cut(v, "-")
		versionFirst := hasSuffix && versionRE.MatchString(core)
		switch {
		case strings.TrimSpace(v) == "":
			return fmt.Errorf("%.80q is blank: it must be a version such as 4.9.0 or 4.9.0-RC1", v)
		case strings.TrimSpace(v) != v:
			return fmt.Errorf("%.80q has spaces or other white space around it", v)
		case versionFirst && suffix == "":
			return fmt.Errorf("%q: nothing follows the \"-\"", v)
		case versionFirst && len(suffix) > MaxVersionSuffix:
			return fmt.Errorf("%.80q: the suffix after %q is longer than %d characters", v, core+"-", MaxVersionSuffix)
		case versionFirst:
			return fmt.Errorf("%.80q: the suffix after %q must be printable ASCII without spaces", v, core+"-")
		}
		return fmt.Errorf("%.80q is not a version: MAJOR.MINOR.PATCH, alone or followed by \"-\" and a suffix "+
			"(e.g. 4.9.0, 4.9.0-RC1)", v)
	}
	if v < MinVersion {
		return fmt.Errorf("%q sorts below %s: it would be stored as DB_VERSION and the next start refused", v, MinVersion)
	}
	return nil
}

// versionNumbers parses the MAJOR.MINOR.PATCH part of a version; ok is false when v
// does not have the shape CheckVersion accepts.
func versionNumbers(v string) (n [3]int, ok bool) {
	if !versionRE.MatchString(v) {
		return n, false
	}
	core, _, _ := strings.Cut(v, "-")
	for i, p := range strings.Split(core, ".") {
		n[i], _ = strconv.Atoi(p)
	}
	return n, true
}

// compareNumbers compares the MAJOR.MINOR.PATCH parts of a and b as numbers; ok is
// false when either does not parse.
func compareNumbers(a, b string) (c int, ok bool) {
	na, oka := versionNumbers(a)
	nb, okb := versionNumbers(b)
	if !oka || !okb {
		return 0, false
	}
	for i := range na {
		switch {
		case na[i] < nb[i]:
			return -1, true
		case na[i] > nb[i]:
			return 1, true
		}
	}
	return 0, true
}

// ordersDifferently reports whether a and b order one way as text (the seed's
// comparison, which the migrations use) and another as numbers, e.g. 4.10.0 and
// 4.9.0. Versions with the same numbers (4.9.0 and 4.9.0-RC1) never do: their text
// order is what release-candidate re-runs rely on.
func ordersDifferently(a, b string) bool {
	num, ok := compareNumbers(a, b)
	if !ok || num == 0 {
		return false
	}
	return num != strings.Compare(a, b)
}

// warnVersionOrder logs a warning when the stored and the code version, or the code
// version and a migration block's version, order differently as text and as numbers:
// the migrations compare text, so such a release would run or skip blocks by text order.
func (s *starter) warnVersionOrder(stored string) {
	if stored != "" && ordersDifferently(stored, s.o.Version) {
		s.log.Warn("stored and code versions order differently as text and as numbers; migrations compare them as text",
			"db_version", stored, "service_version", s.o.Version)
	}
	var rerun []string
	for _, b := range blocks {
		if ordersDifferently(b.version, s.o.Version) {
			rerun = append(rerun, b.version)
		}
	}
	if len(rerun) > 0 {
		s.log.Warn("code version orders differently from migration blocks as text and as numbers; once stored, those blocks re-run at every start",
			"service_version", s.o.Version, "blocks", strings.Join(rerun, ","))
	}
}
