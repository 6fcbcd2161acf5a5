package db

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
)

// kind is how a column's value is stored.
type kind int

const (
	kString kind = iota // varchar/text
	kInt                // int
	kBool               // tinyint(1) 0/1 on MySQL, boolean on PostgreSQL
	kTime               // naive UTC datetime, whole seconds
	kDict               // text holding json.dumps of a dict; NULL written as {}
	kList               // text holding json.dumps of a list; NULL written as []
)

// feature marks columns that only some Magnum releases have.
type feature int

const (
	always         feature = iota
	trustColumns           // cluster.trust_id … trustee_password: up to 22.x, dropped in 23.0.0
	nodeLabels             // nodegroup.node_labels, node_taints: 23.0.0+
	templateDriver         // cluster_template.driver: 18.0.0+
)

type column struct {
	name    string
	kind    kind
	feature feature
}

type table struct {
	name    string
	columns []column
}

func (t *table) column(name string) (column, bool) {
	for _, c := range t.columns {
		if c.name == name {
			return c, true
		}
	}
	return column{}, false
}

// The tables, column for column as Magnum's migrations create them (Zed's, and
// the 23.0.0 revisions' additions).
var (
	clusterTable = &table{"cluster", []column{
		{"created_at", kTime, always}, {"updated_at", kTime, always}, {"id", kInt, always},
		{"uuid", kString, always}, {"name", kString, always}, {"cluster_template_id", kString, always},
		{"api_address", kString, always}, {"stack_id", kString, always}, {"project_id", kString, always},
		{"user_id", kString, always}, {"status", kString, always}, {"discovery_url", kString, always},
		{"status_reason", kString, always}, {"ca_cert_ref", kString, always}, {"magnum_cert_ref", kString, always},
		{"create_timeout", kInt, always},
		{"trust_id", kString, trustColumns}, {"trustee_username", kString, trustColumns},
		{"trustee_user_id", kString, trustColumns}, {"trustee_password", kString, trustColumns},
		{"coe_version", kString, always}, {"container_version", kString, always}, {"keypair", kString, always},
		{"docker_volume_size", kInt, always}, {"labels", kDict, always}, {"master_flavor_id", kString, always},
		{"flavor_id", kString, always}, {"health_status", kString, always}, {"health_status_reason", kDict, always},
		{"fixed_network", kString, always}, {"fixed_subnet", kString, always},
		{"floating_ip_enabled", kBool, always}, {"master_lb_enabled", kBool, always},
		{"etcd_ca_cert_ref", kString, always}, {"front_proxy_ca_cert_ref", kString, always},
	}}
	nodegroupTable = &table{"nodegroup", []column{
		{"created_at", kTime, always}, {"updated_at", kTime, always}, {"id", kInt, always},
		{"uuid", kString, always}, {"name", kString, always}, {"cluster_id", kString, always},
		{"project_id", kString, always}, {"docker_volume_size", kInt, always}, {"labels", kDict, always},
		{"flavor_id", kString, always}, {"image_id", kString, always}, {"node_addresses", kList, always},
		{"node_count", kInt, always}, {"max_node_count", kInt, always}, {"min_node_count", kInt, always},
		{"role", kString, always}, {"is_default", kBool, always}, {"stack_id", kString, always},
		{"status", kString, always}, {"status_reason", kString, always}, {"version", kString, always},
		{"node_labels", kDict, nodeLabels}, {"node_taints", kList, nodeLabels},
	}}
	clusterTemplateTable = &table{"cluster_template", []column{
		{"created_at", kTime, always}, {"updated_at", kTime, always}, {"id", kInt, always},
		{"uuid", kString, always}, {"name", kString, always}, {"flavor_id", kString, always},
		{"keypair_id", kString, always}, {"image_id", kString, always}, {"external_network_id", kString, always},
		{"dns_nameserver", kString, always}, {"apiserver_port", kInt, always}, {"project_id", kString, always},
		{"user_id", kString, always}, {"docker_volume_size", kInt, always}, {"fixed_network", kString, always},
		{"master_flavor_id", kString, always}, {"cluster_distro", kString, always}, {"coe", kString, always},
		{"http_proxy", kString, always}, {"https_proxy", kString, always}, {"no_proxy", kString, always},
		{"registry_enabled", kBool, always}, {"network_driver", kString, always}, {"labels", kDict, always},
		{"tls_disabled", kBool, always}, {"public", kBool, always}, {"server_type", kString, always},
		{"volume_driver", kString, always}, {"insecure_registry", kString, always},
		{"docker_storage_driver", kString, always}, {"master_lb_enabled", kBool, always},
		{"fixed_subnet", kString, always}, {"floating_ip_enabled", kBool, always}, {"hidden", kBool, always},
		{"tags", kString, always}, {"driver", kString, templateDriver},
	}}
	x509Table = &table{"x509keypair", []column{
		{"id", kInt, always}, {"created_at", kTime, always}, {"updated_at", kTime, always},
		{"uuid", kString, always}, {"certificate", kString, always}, {"private_key", kString, always},
		{"project_id", kString, always}, {"user_id", kString, always}, {"intermediates", kString, always},
		{"private_key_passphrase", kString, always},
	}}
	serviceTable = &table{"magnum_service", []column{
		{"created_at", kTime, always}, {"updated_at", kTime, always}, {"id", kInt, always},
		{"report_count", kInt, always}, {"host", kString, always}, {"binary", kString, always},
		{"disabled", kBool, always}, {"disabled_reason", kString, always}, {"last_seen_up", kTime, always},
		{"forced_down", kBool, always},
	}}
	magnumTables = []*table{clusterTable, nodegroupTable, clusterTemplateTable, x509Table, serviceTable}
)

// Fields are column values for an update, by column name (which is also the object field name,
// so an object's changes map onto them directly). Accepted Go values per column:
//
//	text:      string (or a string type such as magnum.ClusterStatus), *string, nil (NULL);
//	           for status/health_status "" is NULL
//	int:       int, int64, int32, *int, *int64, nil
//	bool:      bool, *bool (nil is NULL)
//	datetime:  time.Time, *time.Time, nil; stored as naive UTC whole seconds
//	dict:      magnum.Dict, map[string]string, map[string]any, json.RawMessage, nil ({} is stored)
//	list:      []string, []magnum.Dict, []map[string]string, []any, json.RawMessage, nil ([] is stored)
type Fields map[string]any

// encode turns a Go value into what the driver stores for column c.
func encode(c column, v any) (any, error) {
	rv := reflect.ValueOf(v)
	if v == nil || (rv.Kind() == reflect.Pointer && rv.IsNil()) {
		switch c.kind {
		case kDict:
			return "{}", nil
		case kList:
			return "[]", nil
		}
		return nil, nil
	}
	if rv.Kind() == reflect.Pointer {
		v, rv = rv.Elem().Interface(), rv.Elem()
	}
	switch c.kind {
	case kString:
		if rv.Kind() == reflect.String {
			s := rv.String()
			if s == "" && (c.name == "status" || c.name == "health_status") {
				return nil, nil
			}
			return s, nil
		}
	case kInt:
		switch rv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return rv.Int(), nil
		case reflect.Uint8, reflect.Uint16, reflect.Uint32:
			return int64(rv.Uint()), nil
		}
	case kBool:
		if rv.Kind() == reflect.Bool {
			return rv.Bool(), nil
		}
	case kTime:
		if t, ok := v.(time.Time); ok {
			if t.IsZero() {
				return nil, nil
			}
			return t.UTC().Truncate(time.Second), nil
		}
	case kDict, kList:
		raw, err := jsonOf(v)
		if err != nil {
			return nil, fmt.Errorf("column %s: %v", c.name, err)
		}
		trimmed := strings.TrimSpace(string(raw))
		if trimmed == "null" {
			return encode(c, nil)
		}
		if c.kind == kDict && !strings.HasPrefix(trimmed, "{") {
			return nil, fmt.Errorf("column %s holds a JSON object, got %.40s", c.name, trimmed)
		}
		if c.kind == kList && !strings.HasPrefix(trimmed, "[") {
			return nil, fmt.Errorf("column %s holds a JSON list, got %.40s", c.name, trimmed)
		}
		return pyJSON(raw)
	}
	return nil, fmt.Errorf("column %s: a %T cannot be stored in a %s column", c.name, v, kindName(c.kind))
}

func jsonOf(v any) ([]byte, error) {
	switch x := v.(type) {
	case json.RawMessage:
		if !json.Valid(x) {
			return nil, fmt.Errorf("invalid JSON")
		}
		return x, nil
	case []byte:
		if !json.Valid(x) {
			return nil, fmt.Errorf("invalid JSON")
		}
		return x, nil
	}
	return json.Marshal(v) // Dict keeps its order; Go maps are written with sorted keys
}

func kindName(k kind) string {
	return [...]string{"text", "integer", "boolean", "datetime", "JSON dict", "JSON list"}[k]
}

// scanned holds one row as read, by column name.
type scanned map[string]any

// scanTarget returns a holder for a column's value.
func scanTarget(c column) any {
	switch c.kind {
	case kInt:
		return new(sql.NullInt64)
	case kBool:
		return new(sql.NullBool)
	case kTime:
		return new(sql.NullTime)
	}
	return new(sql.NullString)
}

func (r scanned) str(name string) *string {
	if v, ok := r[name].(*sql.NullString); ok && v.Valid {
		s := v.String
		return &s
	}
	return nil
}

func (r scanned) strOr(name, def string) string {
	if p := r.str(name); p != nil {
		return *p
	}
	return def
}

func (r scanned) int(name string) *int64 {
	if v, ok := r[name].(*sql.NullInt64); ok && v.Valid {
		i := v.Int64
		return &i
	}
	return nil
}

func (r scanned) boolOr(name string, def bool) bool {
	if v, ok := r[name].(*sql.NullBool); ok && v.Valid {
		return v.Bool
	}
	return def
}

func (r scanned) time(name string) *time.Time {
	if v, ok := r[name].(*sql.NullTime); ok && v.Valid {
		t := time.Date(v.Time.Year(), v.Time.Month(), v.Time.Day(), v.Time.Hour(), v.Time.Minute(), v.Time.Second(), v.Time.Nanosecond(), time.UTC)
		return &t
	}
	return nil
}

// dict reads a JSON dict column. NULL, "" and "null" read as empty, as Magnum's
// JSONEncodedDict does. Values that are not strings are kept as their JSON text.
func (r scanned) dict(name string) (magnum.Dict, error) {
	s := r.str(name)
	if s == nil || strings.TrimSpace(*s) == "" || strings.TrimSpace(*s) == "null" {
		return magnum.Dict{}, nil
	}
	var d magnum.Dict
	if err := json.Unmarshal([]byte(*s), &d); err == nil {
		return d, nil
	}
	var generic map[string]json.RawMessage
	if err := json.Unmarshal([]byte(*s), &generic); err != nil {
		return magnum.Dict{}, fmt.Errorf("column %s: %q is not a JSON object", name, *s)
	}
	m := map[string]string{}
	for k, v := range generic {
		var str string
		if json.Unmarshal(v, &str) != nil {
			str = string(v)
		}
		m[k] = str
	}
	return magnum.DictFromMap(m), nil
}

func (r scanned) stringList(name string) ([]string, error) {
	s := r.str(name)
	if s == nil || strings.TrimSpace(*s) == "" || strings.TrimSpace(*s) == "null" {
		return []string{}, nil
	}
	out := []string{}
	if err := json.Unmarshal([]byte(*s), &out); err != nil {
		return nil, fmt.Errorf("column %s: %q is not a JSON list of strings", name, *s)
	}
	return out, nil
}

func (r scanned) dictList(name string) ([]magnum.Dict, error) {
	s := r.str(name)
	if s == nil || strings.TrimSpace(*s) == "" || strings.TrimSpace(*s) == "null" {
		return []magnum.Dict{}, nil
	}
	out := []magnum.Dict{}
	if err := json.Unmarshal([]byte(*s), &out); err != nil {
		return nil, fmt.Errorf("column %s: %q is not a JSON list of string dicts", name, *s)
	}
	return out, nil
}
