package db

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Schema is what the database's columns say about the Magnum release that made it. It is read
// from information_schema, not from a configured version: the bridge writes exactly the columns
// that exist.
type Schema struct {
	// TrustColumns: cluster.trust_id, trustee_username, trustee_user_id, trustee_password exist
	// (Magnum 15.0.1 … 22.x; 23.0.0 dropped them).
	TrustColumns bool
	// NodeGroupLabelsTaints: nodegroup.node_labels and node_taints exist (23.0.0+).
	NodeGroupLabelsTaints bool
	// ClusterTemplateDriver: cluster_template.driver exists (18.0.0+).
	ClusterTemplateDriver bool
	// AlembicVersion is alembic_version.version_num, or "" when the table is missing (as in a
	// schema loaded from SHOW CREATE TABLE output).
	AlembicVersion string

	columns map[string]map[string]bool // table -> present columns
}

// Has reports whether a table has a column.
func (s Schema) Has(table, column string) bool { return s.columns[table][column] }

// Release describes the schema in words, for logs.
func (s Schema) Release() string {
	switch {
	case !s.TrustColumns && s.NodeGroupLabelsTaints:
		return "Magnum 23.0.0 or later (no trusts, nodegroup labels/taints)"
	case s.ClusterTemplateDriver:
		return "Magnum 18.0.0 … 22.x (trusts, cluster_template.driver)"
	default:
		return "Magnum 15.0.1 (Zed) … 17.x"
	}
}

func (s Schema) has(c column, t *table) bool {
	return s.columns[t.name][c.name]
}

// detectSchema reads the columns of the current database and checks that every table and
// column the bridge needs exists.
func (s *Store) detectSchema(ctx context.Context) (Schema, error) {
	var q string
	switch s.name() {
	case MySQL:
		q = `SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()`
	default:
		q = `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()`
	}
	where := fmt.Sprintf("%s database %q at %s", s.target.Dialect, s.target.Database, s.target.Address())
	sch := Schema{columns: map[string]map[string]bool{}}
	err := s.retry(ctx, func(int) error {
		rows, err := s.db.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var tbl, col string
			if err := rows.Scan(&tbl, &col); err != nil {
				return err
			}
			tbl, col = strings.ToLower(tbl), strings.ToLower(col)
			if sch.columns[tbl] == nil {
				sch.columns[tbl] = map[string]bool{}
			}
			sch.columns[tbl][col] = true
		}
		return rows.Err()
	})
	if err != nil {
		return Schema{}, fmt.Errorf("%s: reading the schema: %w", where, err)
	}
	for _, t := range magnumTables {
		cols, ok := sch.columns[t.name]
		if !ok {
			return Schema{}, fmt.Errorf("%s: table %q is missing: this is not a Magnum database, or its schema was never created (run magnum-db-manage upgrade)", where, t.name)
		}
		var missing []string
		for _, c := range t.columns {
			if c.feature == always && !cols[c.name] {
				missing = append(missing, c.name)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return Schema{}, fmt.Errorf("%s: table %q lacks column(s) %s: the schema is older than Magnum 15.0.1 (run magnum-db-manage upgrade)",
				where, t.name, strings.Join(missing, ", "))
		}
	}
	c := sch.columns["cluster"]
	trust := c["trust_id"] && c["trustee_username"] && c["trustee_user_id"] && c["trustee_password"]
	if !trust && (c["trust_id"] || c["trustee_username"] || c["trustee_user_id"] || c["trustee_password"]) {
		return Schema{}, fmt.Errorf("%s: table cluster has only some of the trust columns (trust_id, trustee_*): a half-applied migration?", where)
	}
	sch.TrustColumns = trust
	ng := sch.columns["nodegroup"]
	if ng["node_labels"] != ng["node_taints"] {
		return Schema{}, fmt.Errorf("%s: table nodegroup has only one of node_labels/node_taints: a half-applied migration?", where)
	}
	sch.NodeGroupLabelsTaints = ng["node_labels"]
	sch.ClusterTemplateDriver = sch.columns["cluster_template"]["driver"]
	if sch.columns["alembic_version"]["version_num"] {
		_ = s.db.QueryRowContext(ctx, `SELECT version_num FROM alembic_version`).Scan(&sch.AlembicVersion)
	}
	return sch, nil
}
