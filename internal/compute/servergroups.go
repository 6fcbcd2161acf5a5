package compute

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"
	"github.com/gophercloud/gophercloud/v2/openstack/utils"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// Microversions of Nova's server-group API: 2.64 takes and returns one `policy` (Rocky and later);
// before it a one-element `policies` list, whose soft policies need 2.15.
const (
	microversionPolicy       = "2.64"
	microversionSoftPolicies = "2.15"
)

// maxListPages bounds the offset loop of listServerGroups against a Nova (or proxy) that ignores
// `offset`; at Nova's default max_limit of 1000 per page it is far beyond any project's quota.
const maxListPages = 100

// serverGroupClient returns the compute client with the server-group microversion set, reading
// Nova's version document on first use.
func (c *Client) serverGroupClient(ctx context.Context) (*gophercloud.ServiceClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.negotiated {
		supported, err := utils.GetSupportedMicroversions(ctx, c.compute)
		if err != nil {
			return nil, newError("read Nova's version document at "+c.compute.Endpoint, "", err, c.scrub...)
		}
		for _, v := range []string{microversionPolicy, microversionSoftPolicies} {
			if ok, _ := supported.IsSupported(v); ok {
				c.microversion = v
				break
			}
		}
		c.negotiated = true
	}
	sc := *c.compute
	sc.Microversion = c.microversion
	return &sc, nil
}

// policyOf reads the policy in either shape (`policy` from 2.64, `policies` before).
func policyOf(g servergroups.ServerGroup) string {
	if g.Policy != nil && *g.Policy != "" {
		return *g.Policy
	}
	if len(g.Policies) > 0 {
		return g.Policies[0]
	}
	return ""
}

func describe(g servergroups.ServerGroup) string { return g.Name + " (id " + g.ID + ")" }

// listServerGroups lists the project's groups. Nova pages with limit/offset and caps a page at its
// max_limit, which clients cannot read, so pages are requested until one comes back empty.
func (c *Client) listServerGroups(ctx context.Context, sc *gophercloud.ServiceClient) ([]servergroups.ServerGroup, error) {
	var all []servergroups.ServerGroup
	seen := map[string]bool{}
	for range maxListPages {
		pages, err := servergroups.List(sc, servergroups.ListOpts{Offset: len(all)}).AllPages(ctx)
		if err != nil {
			return nil, newError("list server groups of project "+c.projectID, "", err, c.scrub...)
		}
		page, err := servergroups.ExtractServerGroups(pages)
		if err != nil {
			return nil, newError("list server groups of project "+c.projectID, "", err, c.scrub...)
		}
		if len(page) == 0 || seen[page[0].ID] {
			return all, nil
		}
		for _, g := range page {
			seen[g.ID] = true
		}
		all = append(all, page...)
	}
	return all, nil
}

// currentServerGroups is where Ensure and Delete both start: a Nova client at the negotiated
// microversion and every server group of the project.
func (c *Client) currentServerGroups(ctx context.Context) (*gophercloud.ServiceClient, []servergroups.ServerGroup, error) {
	sc, err := c.serverGroupClient(ctx)
	if err != nil {
		return nil, nil, err
	}
	existing, err := c.listServerGroups(ctx, sc)
	return sc, existing, err
}

// EnsureServerGroups makes each group exist in the client's project with its policy, by name:
// missing groups are created, existing ones with the same policy are kept (so a second call is a
// no-op). A group of that name with another policy is an error matching ErrPolicyMismatch: Nova
// cannot change a group's policy, and replacing it would orphan the servers in it. Duplicates of a
// name (two concurrent creates) are reduced to one, because CAPO refuses an ambiguous name; a
// duplicate that has servers is never deleted and is reported instead.
//
// Every group is attempted; the error joins one *Error per group that is not as asked, each
// naming the group and Nova's message.
func (c *Client) EnsureServerGroups(ctx context.Context, groups []templates.ServerGroup) error {
	want, err := checkGroups(groups)
	if err != nil || len(want) == 0 {
		return err
	}
	sc, existing, err := c.currentServerGroups(ctx)
	if err != nil {
		return err
	}
	byName := map[string][]servergroups.ServerGroup{}
	for _, g := range existing {
		byName[g.Name] = append(byName[g.Name], g)
	}
	var errs []error
	for _, w := range want {
		found := byName[w.Name]
		if len(found) == 0 {
			errs = append(errs, c.createServerGroup(ctx, sc, w))
			continue
		}
		var mismatched []string
		for _, g := range found {
			if p := policyOf(g); p != w.Policy {
				mismatched = append(mismatched, fmt.Sprintf("policy %s (id %s)", p, g.ID))
			}
		}
		if len(mismatched) > 0 {
			errs = append(errs, &Error{Op: "ensure server group", Group: w.Name, mismatch: true, Message: fmt.Sprintf(
				"exists in project %s with %s, not %s; Nova cannot change a group's policy: delete the group or keep its policy",
				c.projectID, strings.Join(mismatched, " and "), w.Policy)})
			continue
		}
		errs = append(errs, c.dedupe(ctx, sc, found))
	}
	return errors.Join(errs...)
}

// checkGroups refuses what Nova would refuse less clearly and merges repeated names.
func checkGroups(groups []templates.ServerGroup) ([]templates.ServerGroup, error) {
	var out []templates.ServerGroup
	for _, g := range groups {
		if g.Name == "" || g.Policy == "" {
			return nil, &Error{Op: "ensure server group", Group: g.Name, Message: fmt.Sprintf("name and policy are required (policy %q)", g.Policy)}
		}
		i := slices.IndexFunc(out, func(o templates.ServerGroup) bool { return o.Name == g.Name })
		switch {
		case i < 0:
			out = append(out, g)
		case out[i].Policy != g.Policy:
			return nil, &Error{Op: "ensure server group", Group: g.Name, Message: fmt.Sprintf(
				"asked for twice, with policies %s and %s", out[i].Policy, g.Policy)}
		}
	}
	return out, nil
}

func (c *Client) createServerGroup(ctx context.Context, sc *gophercloud.ServiceClient, w templates.ServerGroup) error {
	opts := servergroups.CreateOpts{Name: w.Name, Policy: w.Policy}
	if sc.Microversion != microversionPolicy {
		opts = servergroups.CreateOpts{Name: w.Name, Policies: []string{w.Policy}}
	}
	created, err := servergroups.Create(ctx, sc, opts).Extract()
	if err != nil {
		return newError("create server group", w.Name, err, c.scrub...)
	}
	if created == nil || created.ID == "" {
		return &Error{Op: "create server group", Group: w.Name, Message: "Nova answered without a server group id"}
	}
	return nil
}

// dedupe keeps one of several same-named groups (the first with servers, else the oldest, which Nova
// lists first) and deletes the empty others.
func (c *Client) dedupe(ctx context.Context, sc *gophercloud.ServiceClient, found []servergroups.ServerGroup) error {
	if len(found) < 2 {
		return nil
	}
	keep, withServers := -1, 0
	for i, g := range found {
		if len(g.Members) > 0 {
			withServers++
			if keep < 0 {
				keep = i
			}
		}
	}
	if keep < 0 {
		keep = 0
	}
	var errs []error
	for i, g := range found {
		switch {
		case i == keep:
		case len(g.Members) > 0:
			errs = append(errs, &Error{Op: "ensure server group", Group: describe(g), Message: fmt.Sprintf(
				"%d groups of this name have servers (kept %s); CAPO cannot pick one: move or delete the servers of one of them",
				withServers, found[keep].ID)})
		default:
			if err := c.deleteServerGroup(ctx, sc, g); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// deleteServerGroup deletes one group; already gone (404) is success.
func (c *Client) deleteServerGroup(ctx context.Context, sc *gophercloud.ServiceClient, g servergroups.ServerGroup) error {
	err := newError("delete server group", describe(g), servergroups.Delete(ctx, sc, g.ID).ExtractErr(), c.scrub...)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// DeleteServerGroups deletes every group of the client's project with one of these names
// (duplicates included). Names without a group, and groups deleted meanwhile (Nova's 404), are
// fine; every other failure is reported, one *Error per group, naming it and Nova's message.
// Nova deletes a group that still has servers (they just lose the placement constraint), so call
// it once the cluster's machines are gone.
func (c *Client) DeleteServerGroups(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	sc, existing, err := c.currentServerGroups(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, g := range existing {
		if slices.Contains(names, g.Name) {
			errs = append(errs, c.deleteServerGroup(ctx, sc, g))
		}
	}
	return errors.Join(errs...)
}
