package magnum

import (
	"fmt"
	"strings"
	"time"
)

// DateTimeLayout is how oslo.versionedobjects writes a DateTimeField: UTC, second precision, "Z".
const DateTimeLayout = "2006-01-02T15:04:05Z"

// FormatDateTime writes t as a DateTimeField primitive.
func FormatDateTime(t time.Time) string { return t.UTC().Format(DateTimeLayout) }

// Layouts ParseDateTime accepts, the ISO-8601 forms oslo's parse_isotime (iso8601) reads in
// practice: 'T' or ' ' separator, optional fraction, zone as Z, ±hh:mm, ±hhmm or none (UTC).
var dateTimeLayouts = []string{
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02T15:04:05.999999999Z07",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04",
	"2006-01-02",
}

// ParseDateTime reads any common ISO-8601 timestamp; a value without a zone is UTC, as in oslo.
func ParseDateTime(s string) (time.Time, error) {
	in := strings.TrimSpace(s)
	if len(in) > 10 && in[10] == ' ' {
		in = in[:10] + "T" + in[11:]
	}
	for _, layout := range dateTimeLayouts {
		if t, err := time.Parse(layout, in); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not an ISO-8601 date-time", s)
}
