package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
)

// CreateCluster inserts a cluster and its nodegroups (the default master and worker) in one
// transaction, as cluster_create does. created_at is set to now when zero. A redelivered
// cluster_create finds the uuid taken: that is not an error, nothing is inserted, and the
// existing row comes back with created=false.
func (s *Store) CreateCluster(ctx context.Context, c *Cluster, nodegroups ...*NodeGroup) (row *Cluster, created bool, err error) {
	if c == nil || c.UUID == "" {
		return nil, false, errors.New("create cluster: the cluster needs a uuid")
	}
	now := s.timestamp()
	vals := c.values()
	if c.CreatedAt.IsZero() {
		vals["created_at"] = now
	}
	cols, err := s.encodeValues(clusterTable, vals, true)
	if err != nil {
		return nil, false, fmt.Errorf("create cluster %s: %w", c.UUID, err)
	}
	ngCols := make([][]encodedCol, len(nodegroups))
	for i, ng := range nodegroups {
		if ng.ClusterID == "" {
			ng.ClusterID = c.UUID
		}
		if ng.ClusterID != c.UUID {
			return nil, false, fmt.Errorf("create cluster %s: nodegroup %s belongs to cluster %s", c.UUID, ng.Name, ng.ClusterID)
		}
		if ngCols[i], err = s.nodeGroupInsertValues(ng, now); err != nil {
			return nil, false, fmt.Errorf("create cluster %s: %w", c.UUID, err)
		}
	}
	retried := false
	err = s.inTx(ctx, func(ctx context.Context, tx *sql.Tx, maybeApplied bool) error {
		created, retried = false, retried || maybeApplied
		if err := s.insert(ctx, tx, clusterTable, cols); err != nil {
			if s.isDuplicate(err) && s.clusterExists(ctx, c.UUID) {
				return errDuplicate
			}
			return err
		}
		for i, ng := range nodegroups {
			if err := s.insert(ctx, tx, nodegroupTable, ngCols[i]); err != nil {
				if s.isDuplicate(err) {
					return magnum.NodeGroupAlreadyExists(ng.Name, c.UUID)
				}
				return err
			}
		}
		created = true
		return nil
	})
	if err != nil && !errors.Is(err, errDuplicate) {
		return nil, false, opError("create cluster "+c.UUID, err)
	}
	row, err = s.GetCluster(ctx, c.UUID)
	if err == nil && !created && retried && row.CreatedAt.Equal(vals["created_at"].(time.Time).UTC().Truncate(time.Second)) {
		// An earlier attempt of this very call committed and only its acknowledgement was lost.
		created = true
	}
	return row, created, err
}

// errDuplicate ends a transaction whose insert found its uuid already there.
var errDuplicate = errors.New("duplicate uuid")

func (s *Store) clusterExists(ctx context.Context, uuid string) bool {
	_, err := s.selectOne(ctx, s.db, clusterTable, s.quote("uuid")+" = ?", uuid)
	return err == nil
}

// GetCluster reads a cluster by uuid; magnum.ClusterNotFound if there is none.
func (s *Store) GetCluster(ctx context.Context, uuid string) (*Cluster, error) {
	row, err := s.readOne(ctx, clusterTable, s.quote("uuid")+" = ?", uuid)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, magnum.ClusterNotFound(uuid)
	}
	if err != nil {
		return nil, opError("get cluster "+uuid, err)
	}
	return clusterFrom(row)
}

// ListClustersByStatus lists clusters in any of the statuses, by id: what the periodic status
// sync polls, and what a restarted bridge must resume (magnum.SyncStatuses).
func (s *Store) ListClustersByStatus(ctx context.Context, statuses ...magnum.ClusterStatus) ([]*Cluster, error) {
	if len(statuses) == 0 {
		return nil, errors.New("list clusters: no status given")
	}
	args := make([]any, len(statuses))
	for i, st := range statuses {
		args[i] = string(st)
	}
	rows, err := s.readMany(ctx, clusterTable,
		fmt.Sprintf("%s IN (%s) ORDER BY %s", s.quote("status"), placeholders(len(statuses)), s.quote("id")), args...)
	if err != nil {
		return nil, opError("list clusters", err)
	}
	out := make([]*Cluster, 0, len(rows))
	for _, r := range rows {
		c, err := clusterFrom(r)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// UpdateCluster sets columns of a cluster (plus updated_at = now) if the guard holds, and returns
// the row as written. A failed guard is a *ConflictError (errors.Is(err, ErrConflict)); a missing
// cluster is magnum.ClusterNotFound.
func (s *Store) UpdateCluster(ctx context.Context, uuid string, set Fields, g Guard) (*Cluster, error) {
	row, err := s.guardedUpdate(ctx, clusterTable, uuid, s.quote("uuid")+" = ?", []any{uuid}, set, g,
		func() error { return magnum.ClusterNotFound(uuid) })
	if err != nil {
		return nil, opError("update cluster "+uuid, err)
	}
	return clusterFrom(row)
}

// DeleteCluster ends a cluster's delete: from its return on, clients get 404. Deleting what is
// already gone is not an error; deleted says whether a cluster row was removed by this call.
//
// The cluster row goes first, in a commit of its own; its node group rows go NodeGroupDeleteDelay
// later, in the background. magnum-api reads a cluster's row and then, in separate queries, its
// node groups (to sum master_count and node_count): a reader that got the row just before the
// delete must still find the node groups, or it answers 400 "master_count … Value: '0'" for the
// cluster and for the whole project's list instead of the cluster or 404. Node groups without
// their cluster are invisible to the API (it serves node groups only of an existing cluster).
// The commit stamps them with the time of the delete, so that when the delayed removal never runs
// (the store closed, the process ended) a later DeleteCluster removes them once the delay is past.
func (s *Store) DeleteCluster(ctx context.Context, uuid string) (deleted bool, err error) {
	deletedAt := s.timestamp()
	err = s.inTx(ctx, func(ctx context.Context, tx *sql.Tx, maybeApplied bool) error {
		if _, err := s.exec(ctx, tx, fmt.Sprintf("UPDATE %s SET %s = ? WHERE %s = ?",
			s.quote("nodegroup"), s.quote("updated_at"), s.quote("cluster_id")), deletedAt, uuid); err != nil {
			return err
		}
		res, err := s.exec(ctx, tx, fmt.Sprintf("DELETE FROM %s WHERE %s = ?", s.quote("cluster"), s.quote("uuid")), uuid)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		deleted = err == nil && n > 0
		return err
	})
	if err != nil {
		return deleted, opError("delete cluster "+uuid, err)
	}
	delay := s.opts.NodeGroupDeleteDelay
	if delay <= 0 {
		return deleted, opError("delete nodegroups of cluster "+uuid, s.deleteOrphanNodeGroups(ctx, uuid))
	}
	// The cluster is gone, which is what the caller asked for: what is left are rows nobody sees.
	if err := s.deleteOrphanNodeGroups(ctx, ""); err != nil {
		slog.Warn("node groups of clusters deleted earlier are left for the next delete", "error", opError("delete nodegroups", err))
	}
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-s.closing.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.closing, time.Minute)
		defer cancel()
		if err := s.deleteOrphanNodeGroups(ctx, uuid); err != nil {
			slog.Warn("node groups of a deleted cluster are left for the next delete", "cluster", uuid,
				"error", opError("delete nodegroups", err))
		}
	}()
	return deleted, nil
}

// deleteOrphanNodeGroups removes the node groups of the deleted cluster uuid (none when empty)
// and those of every cluster deleted more than NodeGroupDeleteDelay ago. It finds them with a
// plain read and deletes them by uuid, so that no lock is taken on the other clusters' rows (a
// locking scan would block their writers on MariaDB); a cluster row never comes back, so what the
// read found stays an orphan.
func (s *Store) deleteOrphanNodeGroups(ctx context.Context, uuid string) error {
	// Timestamps have whole seconds: one second more keeps every reader's full delay.
	cutoff := s.timestamp().Add(-s.opts.NodeGroupDeleteDelay - time.Second)
	ng, cl := s.quote("nodegroup"), s.quote("cluster")
	var orphans []any
	err := s.retry(ctx, func(int) error {
		orphans = orphans[:0]
		rows, err := s.query(ctx, s.db, fmt.Sprintf(
			"SELECT %s FROM %s WHERE NOT EXISTS (SELECT 1 FROM %s WHERE %s.%s = %s.%s) AND (%s = ? OR %s IS NULL OR %s <= ?)",
			s.quote("uuid"), ng, cl, cl, s.quote("uuid"), ng, s.quote("cluster_id"),
			s.quote("cluster_id"), s.quote("updated_at"), s.quote("updated_at")), uuid, cutoff)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			orphans = append(orphans, id)
		}
		return rows.Err()
	})
	if err != nil || len(orphans) == 0 {
		return err
	}
	return s.inTx(ctx, func(ctx context.Context, tx *sql.Tx, _ bool) error {
		_, err := s.exec(ctx, tx, fmt.Sprintf("DELETE FROM %s WHERE %s IN (%s)", ng, s.quote("uuid"), placeholders(len(orphans))), orphans...)
		return err
	})
}

// ListPublicClusterTemplates reads the public, not hidden cluster templates (the discovery document's
// Kubernetes versions), oldest first.
func (s *Store) ListPublicClusterTemplates(ctx context.Context) ([]*ClusterTemplate, error) {
	return s.clusterTemplates(ctx, "list public cluster templates", fmt.Sprintf("%s = ? AND (%s = ? OR %s IS NULL) ORDER BY %s",
		s.quote("public"), s.quote("hidden"), s.quote("hidden"), s.quote("id")), true, false)
}

// FindClusterTemplates reads the cluster templates a project may use that are named ident or have
// the uuid ident: its own and the public ones, as magnum-api resolves a name for it.
func (s *Store) FindClusterTemplates(ctx context.Context, projectID, ident string) ([]*ClusterTemplate, error) {
	return s.clusterTemplates(ctx, "find cluster template "+ident, fmt.Sprintf("(%s = ? OR %s = ?) AND (%s = ? OR %s = ?) ORDER BY %s",
		s.quote("uuid"), s.quote("name"), s.quote("public"), s.quote("project_id"), s.quote("id")), ident, ident, true, projectID)
}

// clusterTemplates reads the cluster templates where holds.
func (s *Store) clusterTemplates(ctx context.Context, op, where string, args ...any) ([]*ClusterTemplate, error) {
	rows, err := s.readMany(ctx, clusterTemplateTable, where, args...)
	if err != nil {
		return nil, opError(op, err)
	}
	out := make([]*ClusterTemplate, 0, len(rows))
	for _, r := range rows {
		t, err := clusterTemplateFrom(r)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// GetClusterTemplate reads a cluster template by uuid; magnum.ClusterTemplateNotFound if none.
func (s *Store) GetClusterTemplate(ctx context.Context, uuid string) (*ClusterTemplate, error) {
	row, err := s.readOne(ctx, clusterTemplateTable, s.quote("uuid")+" = ?", uuid)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, magnum.ClusterTemplateNotFound(uuid)
	}
	if err != nil {
		return nil, opError("get cluster template "+uuid, err)
	}
	return clusterTemplateFrom(row)
}
