// Package fakeopenstack is a stand-in for the OpenStack APIs of the local stack, in two parts.
//
// The seed part answers what magnum-api consults while it validates cluster templates and clusters:
// Glance (images), Nova (flavors, keypairs) and Neutron (external networks, subnets), plus the few
// GETs Horizon's magnum-ui dialogs need (Nova's keypair list and availability zones, Neutron's
// extension list), from seed data. Tokens are not required there; a valid one adds the caller's own
// simulated networks and subnets to the lists.
//
// The simulation part (simstate.go, neutron.go, servers.go, cinder.go, octavia.go, servergroups.go) keeps the
// resources Cluster API Provider OpenStack v0.14.2 creates — networks, subnets, routers, security
// groups and rules, ports, floating IPs, servers, server groups, volumes, load balancers with listeners,
// pools, members and monitors — in memory, per project, with Nova's instance quota. Every one of
// its routes requires a token, validated with Keystone (KeystoneCallers; without it every token
// shares one project). Servers and load balancers are ACTIVE at once; with WithBoot a server's kubeadm
// user data makes it a node of a simulated workload cluster (package boot). docs/
// openstack-simulator.md lists what is simulated and where it differs from OpenStack.
//
// Every request is logged (with the caller's project and application credential, never the token);
// anything else is answered 404.
package fakeopenstack

import (
	"bytes"
	"crypto/md5" // Nova's keypair fingerprint is defined as an MD5 over the key blob.
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// Seed is the data the fake serves. The same shape is used for the built-in defaults and for a
// --seed file, which extends or overrides the defaults (see Merge).
type Seed struct {
	// ReplaceDefaults, when set in a seed file, drops the built-in seed instead of merging into it.
	ReplaceDefaults bool      `json:"replace_defaults,omitempty"`
	Images          []Image   `json:"images,omitempty"`
	Flavors         []Flavor  `json:"flavors,omitempty"`
	Networks        []Network `json:"networks,omitempty"`
	Subnets         []Subnet  `json:"subnets,omitempty"`
	Keypairs        []Keypair `json:"keypairs,omitempty"`
}

// Image is a Glance v2 image. OSDistro is what magnum-api copies into the template's cluster_distro
// and uses to pick a driver; Properties are further custom image properties (Glance stores them as
// top-level string fields, e.g. kube_version).
type Image struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	Status          string            `json:"status,omitempty"`
	Visibility      string            `json:"visibility,omitempty"`
	DiskFormat      string            `json:"disk_format,omitempty"`
	ContainerFormat string            `json:"container_format,omitempty"`
	OSDistro        string            `json:"os_distro,omitempty"`
	Size            int64             `json:"size,omitempty"`
	MinDisk         int               `json:"min_disk,omitempty"`
	MinRAM          int               `json:"min_ram,omitempty"`
	Owner           string            `json:"owner,omitempty"`
	Tags            []string          `json:"tags,omitempty"`
	Properties      map[string]string `json:"properties,omitempty"`
}

// Flavor is a Nova flavor. Disk is the root disk in GiB; RAM is in MiB.
type Flavor struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	VCPUs     int    `json:"vcpus"`
	RAM       int    `json:"ram"`
	Disk      int    `json:"disk"`
	Ephemeral int    `json:"ephemeral,omitempty"`
	Swap      int    `json:"swap,omitempty"`
	// Private flavors are still listed (the fake has no notion of flavor access); the flag only shows
	// up as os-flavor-access:is_public=false.
	Private bool `json:"private,omitempty"`
	// ExtraSpecs are shown in the flavor's extra_specs (Nova microversion 2.61+), e.g. a GPU flavor's
	// resources:VGPU.
	ExtraSpecs map[string]string `json:"extra_specs,omitempty"`
}

// Network is a Neutron network. External networks are the ones magnum-api accepts as
// --external-network (it lists networks with router:external=True).
type Network struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	External  bool   `json:"external"`
	Shared    bool   `json:"shared,omitempty"`
	MTU       int    `json:"mtu,omitempty"`
	ProjectID string `json:"project_id,omitempty"`
}

// Subnet is a Neutron subnet of one of the seeded networks.
type Subnet struct {
	ID             string   `json:"id"`
	Name           string   `json:"name"`
	NetworkID      string   `json:"network_id"`
	CIDR           string   `json:"cidr"`
	IPVersion      int      `json:"ip_version,omitempty"`
	GatewayIP      string   `json:"gateway_ip,omitempty"`
	EnableDHCP     bool     `json:"enable_dhcp,omitempty"`
	DNSNameservers []string `json:"dns_nameservers,omitempty"`
	ProjectID      string   `json:"project_id,omitempty"`
}

// Keypair is a Nova keypair. The fake returns every keypair to every user: magnum-api looks keypairs
// up with the caller's token, and the local stack has several users who should all find "default".
type Keypair struct {
	Name      string `json:"name"`
	PublicKey string `json:"public_key"`
	Type      string `json:"type,omitempty"`
}

// Fingerprint is Nova's fingerprint of an OpenSSH public key: MD5 over the decoded key blob, as
// colon-separated hex.
func (k Keypair) Fingerprint() (string, error) {
	fields := strings.Fields(k.PublicKey)
	if len(fields) < 2 {
		return "", fmt.Errorf("keypair %q: public_key is not in OpenSSH \"<type> <base64>\" form", k.Name)
	}
	blob, err := base64.StdEncoding.DecodeString(fields[1])
	if err != nil {
		return "", fmt.Errorf("keypair %q: public_key blob is not base64: %w", k.Name, err)
	}
	sum := md5.Sum(blob) // see import comment
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = hex.EncodeToString([]byte{b})
	}
	return strings.Join(parts, ":"), nil
}

// The project that owns the fake's shared resources. Keystone's project ids are random per install, so
// the fake cannot use a real one; magnum-api never compares them.
const fakeOwner = "f0a4e0000000400080000000000000a1"

// Stable identifiers of the default seed, exported because tests and example commands refer to them.
const (
	ImageKube1354ID   = "2404a135-0004-4000-8000-000000000135"
	ImageKube1363ID   = "2404a136-0003-4000-8000-000000000136"
	PublicNetworkID   = "9b1c0e7a-0000-4000-8000-0000000000e1"
	PublicSubnetID    = "9b1c0e7a-0000-4000-8000-0000000000e2"
	PrivateNetworkID  = "9b1c0e7a-0000-4000-8000-0000000000f1"
	PrivateSubnetID   = "9b1c0e7a-0000-4000-8000-0000000000f2"
	DefaultKeypair    = "default"
	defaultPublicKey  = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIxKZ7a8YXhWPShPC9NVB3U7Or1NzNo2i5FVoM6Rkeek fake-openstack default keypair (private key discarded)"
	defaultImageBytes = 2_147_483_648
)

// DefaultSeed is what the fake serves without a --seed file: two Ubuntu 24.04 Kubernetes images, three
// flavors with a root disk, the external network "public" with a subnet, a tenant network "private"
// (so that the router:external filter has something to filter out) and the keypair "default".
func DefaultSeed() Seed {
	ubuntu := func(id, kube string) Image {
		return Image{
			ID: id, Name: "ubuntu-2404-kube-" + kube, Status: "active", Visibility: "public",
			DiskFormat: "qcow2", ContainerFormat: "bare", OSDistro: "ubuntu",
			Size: defaultImageBytes, MinDisk: 20, Owner: fakeOwner,
			Properties: map[string]string{"kube_version": kube, "os_version": "24.04", "os_type": "linux"},
		}
	}
	return Seed{
		Images: []Image{ubuntu(ImageKube1354ID, "v1.35.4"), ubuntu(ImageKube1363ID, "v1.36.3")},
		Flavors: []Flavor{
			{ID: "2", Name: "m1.small", VCPUs: 1, RAM: 2048, Disk: 20},
			{ID: "3", Name: "m1.medium", VCPUs: 2, RAM: 4096, Disk: 40},
			{ID: "4", Name: "m1.large", VCPUs: 4, RAM: 8192, Disk: 80},
		},
		Networks: []Network{
			{ID: PublicNetworkID, Name: "public", External: true, MTU: 1500, ProjectID: fakeOwner},
			{ID: PrivateNetworkID, Name: "private", MTU: 1450, ProjectID: fakeOwner},
		},
		Subnets: []Subnet{
			{ID: PublicSubnetID, Name: "public-subnet", NetworkID: PublicNetworkID, CIDR: "172.24.4.0/24",
				IPVersion: 4, GatewayIP: "172.24.4.1", ProjectID: fakeOwner},
			{ID: PrivateSubnetID, Name: "private-subnet", NetworkID: PrivateNetworkID, CIDR: "10.0.0.0/26",
				IPVersion: 4, GatewayIP: "10.0.0.1", EnableDHCP: true, DNSNameservers: []string{"8.8.8.8"},
				ProjectID: fakeOwner},
		},
		Keypairs: []Keypair{{Name: DefaultKeypair, PublicKey: defaultPublicKey, Type: "ssh"}},
	}
}

// DecodeSeed reads a seed file. Unknown fields are refused so that a typo does not silently fall back
// to a default.
func DecodeSeed(r io.Reader) (Seed, error) {
	var s Seed
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Seed{}, fmt.Errorf("seed: %w", err)
	}
	if dec.More() {
		return Seed{}, errors.New("seed: trailing data after the JSON object")
	}
	return s, nil
}

// Merge returns base extended by over: an entry of over with the id (for keypairs: the name) of an
// entry of base replaces it in place, other entries are appended. With over.ReplaceDefaults the result
// is over alone.
func (base Seed) Merge(over Seed) Seed {
	if over.ReplaceDefaults {
		over.ReplaceDefaults = false
		return over
	}
	return Seed{
		Images:   mergeBy(base.Images, over.Images, func(i Image) string { return i.ID }),
		Flavors:  mergeBy(base.Flavors, over.Flavors, func(f Flavor) string { return f.ID }),
		Networks: mergeBy(base.Networks, over.Networks, func(n Network) string { return n.ID }),
		Subnets:  mergeBy(base.Subnets, over.Subnets, func(s Subnet) string { return s.ID }),
		Keypairs: mergeBy(base.Keypairs, over.Keypairs, func(k Keypair) string { return k.Name }),
	}
}

func mergeBy[T any](base, over []T, key func(T) string) []T {
	out := append([]T(nil), base...)
	index := make(map[string]int, len(out))
	for i, item := range out {
		index[key(item)] = i
	}
	for _, item := range over {
		if i, ok := index[key(item)]; ok {
			out[i] = item
			continue
		}
		index[key(item)] = len(out)
		out = append(out, item)
	}
	return out
}

// Validate reports every problem that would make the fake answer nonsense: missing ids or names,
// duplicates, subnets of unknown networks, unparsable public keys, and flavors magnum could not boot.
func (s Seed) Validate() error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	unique := func(kind, key string, seen map[string]bool) {
		if key == "" {
			fail("%s: empty id or name", kind)
		} else if seen[key] {
			fail("%s %q: duplicate", kind, key)
		}
		seen[key] = true
	}

	seen := map[string]bool{}
	for _, img := range s.Images {
		unique("image", img.ID, seen)
		if img.Name == "" {
			fail("image %q: empty name", img.ID)
		}
		for k := range img.Properties {
			if reservedImageFields[k] {
				fail("image %q: property %q collides with a Glance image field", img.ID, k)
			}
		}
	}
	seen = map[string]bool{}
	names := map[string]bool{}
	for _, f := range s.Flavors {
		unique("flavor", f.ID, seen)
		unique("flavor name", f.Name, names)
		if f.VCPUs <= 0 || f.RAM <= 0 {
			fail("flavor %q: vcpus and ram must be positive", f.Name)
		}
		if f.Disk < 0 {
			fail("flavor %q: negative disk", f.Name)
		}
	}
	seen = map[string]bool{}
	for _, n := range s.Networks {
		unique("network", n.ID, seen)
	}
	networks := seen
	seen = map[string]bool{}
	for _, sn := range s.Subnets {
		unique("subnet", sn.ID, seen)
		if !networks[sn.NetworkID] {
			fail("subnet %q: network_id %q is not a seeded network", sn.ID, sn.NetworkID)
		}
	}
	seen = map[string]bool{}
	for _, k := range s.Keypairs {
		unique("keypair", k.Name, seen)
		if _, err := k.Fingerprint(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LoadSeed decodes a seed file, merges it into the defaults and validates the result.
func LoadSeed(data []byte) (Seed, error) {
	over, err := DecodeSeed(bytes.NewReader(data))
	if err != nil {
		return Seed{}, err
	}
	merged := DefaultSeed().Merge(over)
	if err := merged.Validate(); err != nil {
		return Seed{}, fmt.Errorf("seed: %w", err)
	}
	return merged, nil
}

// SetPublicCIDR moves the external network's subnet (and so its floating IPs) to cidr, its gateway
// the first address.
func (s *Seed) SetPublicCIDR(cidr string) error {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() {
		return fmt.Errorf("%q is not an IPv4 CIDR", cidr)
	}
	for i := range s.Subnets {
		if s.Subnets[i].ID == PublicSubnetID {
			s.Subnets[i].CIDR, s.Subnets[i].GatewayIP = p.Masked().String(), p.Masked().Addr().Next().String()
			return nil
		}
	}
	return errors.New("the seed has no public subnet")
}
