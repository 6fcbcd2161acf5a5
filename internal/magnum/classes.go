package magnum

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// class is what this service knows about one Magnum object class.
type class struct {
	// latest is the newest version whose field list this service knows (it never emits more).
	latest Version
	// oldest is the oldest version it can emit: the Zed (15.0.1) one. Older field lists differ in
	// ways it does not track, and no supported magnum-api sends them.
	oldest Version
}

// classes: the object classes magnum-api sends. Federation, Quota and Stats have no typed view (the conductor never handles
// them) but are known, so that primitives of them decode generically.
var classes = map[string]class{
	"Cluster":         {latest: Version{1, 24}, oldest: Version{1, 23}},
	"ClusterTemplate": {latest: Version{1, 21}, oldest: Version{1, 20}},
	"NodeGroup":       {latest: Version{1, 2}, oldest: Version{1, 1}},
	"Certificate":     {latest: Version{1, 2}, oldest: Version{1, 2}},
	"X509KeyPair":     {latest: Version{1, 2}, oldest: Version{1, 2}},
	"MagnumService":   {latest: Version{1, 0}, oldest: Version{1, 0}},
	"Federation":      {latest: Version{1, 0}, oldest: Version{1, 0}},
	"Quota":           {latest: Version{1, 0}, oldest: Version{1, 0}},
	"Stats":           {latest: Version{1, 0}, oldest: Version{1, 0}},
}

func knownClassNames() []string {
	names := make([]string, 0, len(classes))
	for n := range classes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LatestVersion is the newest version of a class this service knows.
func LatestVersion(name string) (Version, bool) {
	c, ok := classes[name]
	return c.latest, ok
}

// Release presets: the versions each magnum-api release sends and understands (read from
// their object registries). Certificate, X509KeyPair and MagnumService never changed.
var (
	// VersionsZed is Magnum 15.0.1 (Zed) up to 17.x.
	VersionsZed = map[string]Version{
		"Cluster": {1, 23}, "ClusterTemplate": {1, 20}, "NodeGroup": {1, 1},
		"Certificate": {1, 2}, "X509KeyPair": {1, 2}, "MagnumService": {1, 0},
	}
	// Versions2024 is Magnum 18.0.0 (2024.1) up to 22.x (2026.1): ClusterTemplate gained driver.
	Versions2024 = map[string]Version{
		"Cluster": {1, 23}, "ClusterTemplate": {1, 21}, "NodeGroup": {1, 1},
		"Certificate": {1, 2}, "X509KeyPair": {1, 2}, "MagnumService": {1, 0},
	}
	// Versions23 is Magnum 23.0.0: trusts removed from Cluster, node labels/taints on NodeGroup.
	Versions23 = map[string]Version{
		"Cluster": {1, 24}, "ClusterTemplate": {1, 21}, "NodeGroup": {1, 2},
		"Certificate": {1, 2}, "X509KeyPair": {1, 2}, "MagnumService": {1, 0},
	}
)

// ReleaseVersions maps a release name (as an operator would write it in the bridge's
// configuration) to its preset.
func ReleaseVersions(release string) (map[string]Version, error) {
	switch strings.ToLower(strings.TrimSpace(release)) {
	case "zed", "2022.2", "15", "16", "17", "2023.1", "2023.2":
		return VersionsZed, nil
	case "2024.1", "2024.2", "2025.1", "2025.2", "2026.1", "18", "19", "20", "21", "22":
		return Versions2024, nil
	case "2026.2", "23", "master":
		return Versions23, nil
	}
	return nil, fmt.Errorf("unknown Magnum release %q (known: zed, 2024.1 … 2026.1, 23)", release)
}

// Versions says at which version to emit each object class, so that the running magnum-api can
// read what the bridge sends: Python refuses an object whose minor is newer than its own
// (IncompatibleObjectVersion, HTTP 500) and cannot backport it. It starts from a configured
// preset and learns from what the API sends (Observe). It never answers more than the lowest
// version seen or configured for a class, so during a rolling upgrade with API replicas of two
// releases it keeps using the version both understand; and never more than this service knows.
//
// Safe for concurrent use.
type Versions struct {
	mu  sync.RWMutex
	max map[string]Version
}

// NewVersions starts a table from a preset, e.g. ReleaseVersions("2024.1"). With nil the table is
// learned only: a class not yet observed is emitted at its Zed version, the oldest this service
// writes and so one every supported magnum-api reads.
func NewVersions(preset map[string]Version) *Versions {
	v := &Versions{max: map[string]Version{}}
	for name, ver := range preset {
		v.max[name] = ver
	}
	return v
}

// Observe records the version of every object in a received primitive, nested ones included
// (a Cluster's cluster_template). Objects of unknown classes are ignored.
func (v *Versions) Observe(obj *Object) {
	if obj == nil {
		return
	}
	v.observe(obj.Name, obj.Version)
	for _, name := range obj.names {
		raw := obj.data[name]
		if IsPrimitive(raw) {
			if nested, err := parseObject(raw); err == nil {
				v.Observe(nested)
			}
		}
	}
}

// ObserveRaw is Observe for a JSON value that may hold objects anywhere (an RPC "args" dict).
func (v *Versions) ObserveRaw(raw json.RawMessage) {
	var walk func(json.RawMessage, int)
	walk = func(r json.RawMessage, depth int) {
		if depth > 32 {
			return
		}
		if IsPrimitive(r) {
			if o, err := parseObject(r); err == nil {
				v.Observe(o)
			}
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(r, &m) == nil {
			for _, x := range m {
				walk(x, depth+1)
			}
			return
		}
		var l []json.RawMessage
		if json.Unmarshal(r, &l) == nil {
			for _, x := range l {
				walk(x, depth+1)
			}
		}
	}
	walk(raw, 0)
}

func (v *Versions) observe(name string, ver Version) {
	if _, known := classes[name]; !known {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur, ok := v.max[name]; !ok || (ver.Major == cur.Major && ver.Less(cur)) {
		v.max[name] = ver
	}
}

// Set pins a class's version (configuration).
func (v *Versions) Set(name string, ver Version) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.max[name] = ver
}

// For returns the version to emit a class at: the table's entry capped at the newest this
// service knows. An unknown class, or an entry older than the oldest it can write, is an error.
func (v *Versions) For(name string) (Version, error) {
	cls, ok := classes[name]
	if !ok {
		return Version{}, &ObjectError{Kind: ErrUnknownClass, Class: name}
	}
	want, ok := VersionsZed[name]
	if !ok {
		want = cls.latest
	}
	if v != nil {
		v.mu.RLock()
		if ver, ok := v.max[name]; ok {
			want = ver
		}
		v.mu.RUnlock()
	}
	if want.Major != cls.latest.Major {
		return Version{}, &ObjectError{Kind: ErrIncompatibleVersion, Class: name, Version: want.String(),
			Detail: fmt.Sprintf("this service writes %s %d.x", name, cls.latest.Major)}
	}
	if cls.latest.Less(want) {
		want = cls.latest
	}
	if want.Less(cls.oldest) {
		return Version{}, &ObjectError{Kind: ErrIncompatibleVersion, Class: name, Version: want.String(),
			Detail: fmt.Sprintf("the oldest %s version this service writes is %s", name, cls.oldest)}
	}
	return want, nil
}

// Derive returns a copy in which the given objects' versions replace the table's: the versions
// for a reply to exactly the caller that sent them.
func (v *Versions) Derive(objs ...*Object) *Versions {
	d := NewVersions(map[string]Version{})
	v.mu.RLock()
	for n, ver := range v.max {
		d.max[n] = ver
	}
	v.mu.RUnlock()
	var set func(*Object)
	set = func(o *Object) {
		if o == nil {
			return
		}
		if _, known := classes[o.Name]; known {
			d.max[o.Name] = o.Version
		}
		for _, name := range o.names {
			if raw := o.data[name]; IsPrimitive(raw) {
				if nested, err := parseObject(raw); err == nil {
					set(nested)
				}
			}
		}
	}
	for _, o := range objs {
		set(o)
	}
	return d
}

// Snapshot returns the table's current entries.
func (v *Versions) Snapshot() map[string]Version {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make(map[string]Version, len(v.max))
	for n, ver := range v.max {
		out[n] = ver
	}
	return out
}
