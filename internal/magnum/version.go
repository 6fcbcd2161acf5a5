package magnum

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is an oslo.versionedobjects version "major.minor". A receiver accepts an object of the
// same major and a minor no newer than its own; anything else is IncompatibleObjectVersion.
type Version struct {
	Major, Minor int
}

// ParseVersion reads "1.23". Like oslo.versionedobjects, a three-part "1.23.4" is read as "1.23".
func ParseVersion(s string) (Version, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("object version %q is not major.minor", s)
	}
	var v Version
	var err error
	if v.Major, err = parseVersionPart(parts[0]); err != nil {
		return Version{}, fmt.Errorf("object version %q: %w", s, err)
	}
	if v.Minor, err = parseVersionPart(parts[1]); err != nil {
		return Version{}, fmt.Errorf("object version %q: %w", s, err)
	}
	if len(parts) == 3 {
		if _, err := parseVersionPart(parts[2]); err != nil {
			return Version{}, fmt.Errorf("object version %q: %w", s, err)
		}
	}
	return v, nil
}

func parseVersionPart(p string) (int, error) {
	if p == "" || len(p) > 6 || strings.TrimLeft(p, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a number", p)
	}
	return strconv.Atoi(p)
}

// MustVersion is ParseVersion for constants; it panics on a malformed literal (a programming error).
func MustVersion(s string) Version {
	v, err := ParseVersion(s)
	if err != nil {
		panic(err)
	}
	return v
}

func (v Version) String() string { return strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor) }

// IsZero reports an unset version.
func (v Version) IsZero() bool { return v == Version{} }

// Less orders versions.
func (v Version) Less(o Version) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	return v.Minor < o.Minor
}
