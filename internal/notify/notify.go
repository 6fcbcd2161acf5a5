// Package notify emits Magnum's cluster notifications, as the Python conductor does when
// [oslo_messaging_notifications] driver is set: a CADF "activity" event per cluster operation
// (event type magnum.cluster.create / update / delete) with outcome pending when the operation
// starts, success when it completes and failure when it fails (priority ERROR), published by
// oslo.messaging's notifier format on the notifications topic (rpc.Notifier). Ceilometer and
// billing systems consume these.
//
// The payload follows magnum/conductor/utils.py notify_about_cluster_operation: initiator (the
// request's user, project and domain; none for the status sync, which runs as Magnum's admin
// context), target (the cluster, with a cluster_data attachment) and observer.
package notify

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
)

// CADF actions and outcomes (pycadf.cadftaxonomy).
const (
	ActionCreate = "create"
	ActionUpdate = "update"
	ActionDelete = "delete"

	OutcomePending = "pending"
	OutcomeSuccess = "success"
	OutcomeFailure = "failure"
)

const (
	typeURIEvent   = "http://schemas.dmtf.org/cloud/audit/1.0/event"
	typeURIUser    = "service/security/account/user"
	typeURICluster = "service/magnum/cluster"
	// cadfTime is pycadf's timestamp format ("%Y-%m-%dT%H:%M:%S.%f%z").
	cadfTime = "2006-01-02T15:04:05.000000-0700"
	// perfectTime is oslo's PERFECT_TIME_FORMAT, how to_primitive writes the cluster's datetimes.
	perfectTime = "2006-01-02T15:04:05.000000"
)

// EventType is magnum.cluster.<action>.
func EventType(action string) string { return "magnum.cluster." + action }

type resource struct {
	ID          string       `json:"id"`
	TypeURI     string       `json:"typeURI"`
	Name        *string      `json:"name,omitempty"`
	UserID      string       `json:"user_id,omitempty"`
	ProjectID   string       `json:"project_id,omitempty"`
	DomainID    string       `json:"domain_id,omitempty"`
	Attachments []attachment `json:"attachments,omitempty"`
}

type attachment struct {
	TypeURI string      `json:"typeURI"`
	Content clusterData `json:"content"`
	Name    string      `json:"name"`
}

// clusterData is the attachment's content, with Magnum's keys (including its
// "docker_volume_size:" spelling).
type clusterData struct {
	Status            *string           `json:"status"`
	StatusReason      *string           `json:"status_reason"`
	ProjectID         *string           `json:"project_id"`
	CreatedAt         *string           `json:"created_at"`
	UpdatedAt         *string           `json:"updated_at"`
	ClusterTemplateID *string           `json:"cluster_template_id"`
	Keypair           *string           `json:"keypair"`
	DockerVolumeSize  *int64            `json:"docker_volume_size:"`
	Labels            map[string]string `json:"labels"`
	MasterFlavorID    *string           `json:"master_flavor_id"`
	FlavorID          *string           `json:"flavor_id"`
	StackID           *string           `json:"stack_id"`
	HealthStatus      *string           `json:"health_status"`
	CreateTimeout     *int64            `json:"create_timeout"`
	APIAddress        *string           `json:"api_address"`
	DiscoveryURL      *string           `json:"discovery_url"`
	NodeAddresses     []string          `json:"node_addresses"`
	MasterAddresses   []string          `json:"master_addresses"`
	NodeCount         int64             `json:"node_count"`
	MasterCount       int64             `json:"master_count"`
}

type event struct {
	TypeURI   string   `json:"typeURI"`
	EventType string   `json:"eventType"`
	ID        string   `json:"id"`
	EventTime string   `json:"eventTime"`
	Action    string   `json:"action"`
	Outcome   string   `json:"outcome"`
	Observer  resource `json:"observer"`
	Initiator resource `json:"initiator"`
	Target    resource `json:"target"`
}

func optPtr[T any](o magnum.Opt[T]) *T {
	if v, ok := o.Get(); ok {
		return &v
	}
	return nil
}

func timePtr(o magnum.Opt[time.Time]) *string {
	if t, ok := o.Get(); ok {
		s := t.UTC().Format(perfectTime)
		return &s
	}
	return nil
}

// Payload builds the CADF event Magnum sends for a cluster operation. rctx is the request's
// context (nil for the status sync: Magnum's periodic task runs as an admin context with no user
// or project); cl may be nil when the cluster is unknown (Magnum then sends a target without id
// data). groups are the cluster's node groups, from which Magnum's Cluster object derives
// node_count, master_count and the addresses. newID makes CADF identifiers (uuid4 by default).
func Payload(rctx *rpc.Context, action, outcome string, cl *magnum.Cluster, groups []*magnum.NodeGroup, now time.Time, newID func() string) json.RawMessage {
	if newID == nil {
		newID = uuid.NewString
	}
	initiator := resource{ID: newID(), TypeURI: typeURIUser}
	if rctx != nil {
		initiator.UserID = first(rctx.UserID, rctx.User)
		initiator.ProjectID = first(rctx.ProjectID, rctx.Project)
		initiator.DomainID = rctx.DomainID
	}
	target := resource{ID: newID(), TypeURI: typeURICluster}
	if cl != nil {
		target.ID = cl.UUID.Or(target.ID)
		target.Name = optPtr(cl.Name)
		data := clusterData{
			Status: (*string)(optPtr(cl.Status)), StatusReason: optPtr(cl.StatusReason), ProjectID: optPtr(cl.ProjectID),
			CreatedAt: timePtr(cl.CreatedAt), UpdatedAt: timePtr(cl.UpdatedAt), ClusterTemplateID: optPtr(cl.ClusterTemplateID),
			Keypair: optPtr(cl.Keypair), DockerVolumeSize: optPtr(cl.DockerVolumeSize), MasterFlavorID: optPtr(cl.MasterFlavorID),
			FlavorID: optPtr(cl.FlavorID), StackID: optPtr(cl.StackID), HealthStatus: (*string)(optPtr(cl.HealthStatus)),
			CreateTimeout: optPtr(cl.CreateTimeout), APIAddress: optPtr(cl.APIAddress), DiscoveryURL: optPtr(cl.DiscoveryURL),
			NodeAddresses: []string{}, MasterAddresses: []string{},
		}
		if labels, ok := cl.Labels.Get(); ok {
			data.Labels = labels.Map()
			if data.Labels == nil {
				data.Labels = map[string]string{}
			}
		}
		// Magnum's Cluster.node_count/master_count/…_addresses sum the node groups by role.
		for _, g := range groups {
			if g.Role.Or("") == "master" {
				data.MasterCount += g.NodeCount.Or(0)
				data.MasterAddresses = append(data.MasterAddresses, g.NodeAddresses.Or(nil)...)
			} else {
				data.NodeCount += g.NodeCount.Or(0)
				data.NodeAddresses = append(data.NodeAddresses, g.NodeAddresses.Or(nil)...)
			}
		}
		target.Attachments = []attachment{{TypeURI: typeURICluster, Content: data, Name: "cluster_data"}}
	}
	ev := event{
		TypeURI: typeURIEvent, EventType: "activity", ID: newID(), EventTime: now.UTC().Format(cadfTime),
		Action: action, Outcome: outcome,
		Observer:  resource{ID: newID(), TypeURI: typeURICluster},
		Initiator: initiator, Target: target,
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		panic("notify: a CADF event of strings and numbers always marshals: " + err.Error())
	}
	return raw
}

// Priority is the notifier method Magnum uses: error for a failure, info otherwise.
func Priority(outcome string) string {
	if outcome == OutcomeFailure {
		return "ERROR"
	}
	return "INFO"
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Sender publishes one notification (rpc.Notifier).
type Sender interface {
	Notify(ctx context.Context, n *rpc.Notification) error
}

// Notifier emits cluster notifications. A nil *Notifier emits nothing (notifications off).
type Notifier struct {
	sender      Sender
	publisherID string
	log         *slog.Logger
	// sent, if set, is told about every notification (for metrics).
	sent func(eventType string, err error)
	now  func() time.Time
	// Version1 sends without the 2.0 envelope ([oslo_messaging_notifications] driver = messaging).
	Version1 bool
}

// New returns a notifier publishing as publisherID (Magnum: "container-infra.<host>").
func New(sender Sender, publisherID string, log *slog.Logger, sent func(string, error)) *Notifier {
	if log == nil {
		log = slog.Default()
	}
	return &Notifier{sender: sender, publisherID: publisherID, log: log, sent: sent, now: time.Now}
}

// sendTimeout bounds one notification: a broker outage must not hold up the operation that
// emits it (Python's notifier logs and drops too).
const sendTimeout = 10 * time.Second

// ClusterOperation emits magnum.cluster.<action> with outcome. A notification that cannot be
// sent is logged and dropped, as oslo's notifier does; it never fails the operation.
func (n *Notifier) ClusterOperation(ctx context.Context, rctx *rpc.Context, action, outcome string, cl *magnum.Cluster, groups []*magnum.NodeGroup) {
	if n == nil {
		return
	}
	note := &rpc.Notification{
		PublisherID: n.publisherID, EventType: EventType(action), Priority: Priority(outcome),
		Payload: Payload(rctx, action, outcome, cl, groups, n.now(), nil), Context: rctx, Time: n.now(),
		Version1: n.Version1,
	}
	if rctx == nil {
		note.Context = AdminContext()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	err := n.sender.Notify(sctx, note)
	if n.sent != nil {
		n.sent(note.EventType, err)
	}
	uuid := ""
	if cl != nil {
		uuid = cl.UUID.Or("")
	}
	if err != nil {
		n.log.WarnContext(ctx, "notification not sent", "event_type", note.EventType, "outcome", outcome, "cluster", uuid, "error", err.Error())
		return
	}
	n.log.DebugContext(ctx, "notification sent", "event_type", note.EventType, "outcome", outcome, "cluster", uuid)
}

// AdminContext is the context Magnum's periodic status sync notifies with
// (context.make_admin_context(all_tenants=True)).
func AdminContext() *rpc.Context {
	return &rpc.Context{IsAdmin: true, AllTenants: true, Roles: []string{}}
}

// ActionOf maps a cluster status to the operation it belongs to ("" for none), as Magnum's
// ClusterUpdateJob.status_to_event does.
func ActionOf(status string) string {
	switch {
	case strings.HasPrefix(status, "CREATE_"):
		return ActionCreate
	case strings.HasPrefix(status, "UPDATE_"), strings.HasPrefix(status, "ROLLBACK_"):
		return ActionUpdate
	case strings.HasPrefix(status, "DELETE_"):
		return ActionDelete
	}
	return ""
}
