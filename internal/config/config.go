// Package config reads the ini file that Magnum's Python services read (magnum.conf), with the
// oslo.config conventions that matter: sections, "key = value", repeated files where later ones win,
// booleans in oslo's spellings, and list values separated by commas. Unknown keys are never an error:
// File reports those of a section nothing read (Unread), and a renamed key is read under its former
// name with a deprecation warning (Rename, Warnings).
//
// It is a leaf package: each consumer (rpc, the DB store, the bridge's own settings) turns the keys it
// owns into its own typed options with the getters below, which name the section and key in every
// error so that a bad value is refused at start-up with a message an operator can act on.
package config

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/ini.v1"
)

// File is a parsed magnum.conf (possibly several files merged, later ones winning).
type File struct {
	ini   *ini.File
	Paths []string

	mu       sync.Mutex
	read     map[sectionKey]bool
	renamed  map[sectionKey]string // the new name → the former one
	warnings []string
}

type sectionKey struct{ section, key string }

// Rename lets key be set under its former name: a release that renames a key reads the old name,
// with a warning, so that an operator's configuration keeps working through the upgrade.
func (f *File) Rename(section, former, key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.renamed == nil {
		f.renamed = map[sectionKey]string{}
	}
	f.renamed[sectionKey{section, key}] = former
}

// Warnings are the deprecated names the reads so far found set, once each.
func (f *File) Warnings() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.warnings)
}

// Unread lists the keys set in section that no read asked for, sorted: options this program does
// not know (a typo, or one a newer release added).
func (f *File) Unread(section string) []string {
	if f == nil || f.ini == nil {
		return nil
	}
	s, err := f.ini.GetSection(section)
	if err != nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, k := range s.KeyStrings() {
		if !f.read[sectionKey{section, k}] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func (f *File) markRead(section, key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.read == nil {
		f.read = map[sectionKey]bool{}
	}
	f.read[sectionKey{section, key}] = true
}

// Load reads one or more ini files, in order. A missing or unreadable file is an error.
func Load(paths ...string) (*File, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("config: no configuration file given")
	}
	f := ini.Empty(ini.LoadOptions{AllowShadows: false, Insensitive: false, IgnoreInlineComment: true})
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		if err := f.Append(data); err != nil {
			return nil, fmt.Errorf("config: parse %s: %w", p, err)
		}
	}
	return &File{ini: f, Paths: paths}, nil
}

// Parse reads configuration from text; used by tests and tools.
func Parse(text string) (*File, error) {
	f, err := ini.LoadSources(ini.LoadOptions{IgnoreInlineComment: true}, []byte(text))
	if err != nil {
		return nil, fmt.Errorf("config: parse: %w", err)
	}
	return &File{ini: f}, nil
}

// Error names the offending key, e.g. "[database] connection: unsupported scheme".
type Error struct {
	Section, Key, Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("[%s] %s: %s", e.Section, e.Key, e.Reason) }

// Lookup returns the raw value and whether the key is set. oslo.config treats "[DEFAULT]" keys as
// visible in every section only for interpolation, which Magnum does not use, so neither do we.
// A key set under both its name and its former one takes the value of its name.
func (f *File) Lookup(section, key string) (string, bool) {
	if f == nil || f.ini == nil {
		return "", false
	}
	f.markRead(section, key)
	f.mu.Lock()
	former, renamed := f.renamed[sectionKey{section, key}]
	f.mu.Unlock()
	if renamed {
		f.markRead(section, former)
	}
	v, ok := f.raw(section, key)
	_, formerSet := f.raw(section, former)
	switch {
	case !renamed || !formerSet:
		return v, ok
	case ok:
		// Both: a configuration kept for the previous release next to the new name.
		f.warn(fmt.Sprintf("[%s] %s is ignored: %s, its new name, is set", section, former, key))
		return v, ok
	}
	f.warn(fmt.Sprintf("[%s] %s is deprecated: it is now %s, and the former name will not be read after the next release", section, former, key))
	return f.raw(section, former)
}

func (f *File) warn(w string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.warnings, w) {
		f.warnings = append(f.warnings, w)
	}
}

func (f *File) raw(section, key string) (string, bool) {
	s, err := f.ini.GetSection(section)
	if err != nil || !s.HasKey(key) {
		return "", false
	}
	return strings.TrimSpace(s.Key(key).String()), true
}

// String returns the value or def when unset.
func (f *File) String(section, key, def string) string {
	if v, ok := f.Lookup(section, key); ok {
		return v
	}
	return def
}

// Bool parses oslo.config's boolean spellings.
func (f *File) Bool(section, key string, def bool) (bool, error) {
	v, ok := f.Lookup(section, key)
	if !ok || v == "" {
		return def, nil
	}
	switch strings.ToLower(v) {
	case "true", "1", "yes", "on", "y", "t":
		return true, nil
	case "false", "0", "no", "off", "n", "f":
		return false, nil
	}
	return def, &Error{section, key, fmt.Sprintf("%q is not a boolean", v)}
}

// Int parses an integer, optionally bounded (min <= v <= max when max > min).
func (f *File) Int(section, key string, def, min, max int) (int, error) {
	v, ok := f.Lookup(section, key)
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return def, &Error{section, key, fmt.Sprintf("%q is not an integer", v)}
	}
	if max > min && (n < min || n > max) {
		return def, &Error{section, key, fmt.Sprintf("%d is outside [%d, %d]", n, min, max)}
	}
	return n, nil
}

// Float parses a floating point number.
func (f *File) Float(section, key string, def float64) (float64, error) {
	v, ok := f.Lookup(section, key)
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return def, &Error{section, key, fmt.Sprintf("%q is not a number", v)}
	}
	return n, nil
}

// Seconds parses an integer number of seconds as a duration.
func (f *File) Seconds(section, key string, def time.Duration) (time.Duration, error) {
	v, ok := f.Lookup(section, key)
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 {
		return def, &Error{section, key, fmt.Sprintf("%q is not a non-negative number of seconds", v)}
	}
	return time.Duration(n * float64(time.Second)), nil
}

// List splits a comma-separated value, dropping empty items.
func (f *File) List(section, key string, def []string) []string {
	v, ok := f.Lookup(section, key)
	if !ok {
		return def
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// OneOf checks that a value is one of the allowed choices.
func (f *File) OneOf(section, key, def string, choices ...string) (string, error) {
	v := f.String(section, key, def)
	for _, c := range choices {
		if v == c {
			return v, nil
		}
	}
	return def, &Error{section, key, fmt.Sprintf("%q is not one of %s", v, strings.Join(choices, ", "))}
}
