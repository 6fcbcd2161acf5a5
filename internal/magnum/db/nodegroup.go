package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
)

func (s *Store) nodeGroupInsertValues(ng *NodeGroup, now time.Time) ([]encodedCol, error) {
	if ng.UUID == "" || ng.Name == "" || ng.ClusterID == "" || ng.ProjectID == "" {
		return nil, fmt.Errorf("nodegroup %q: uuid, name, cluster_id and project_id are required (NOT NULL)", ng.Name)
	}
	vals := ng.values()
	if ng.CreatedAt.IsZero() {
		vals["created_at"] = now
	}
	return s.encodeValues(nodegroupTable, vals, true)
}

// CreateNodeGroup inserts a nodegroup (nodegroup_create). A redelivery finds the uuid taken and
// returns the existing row with created=false; another nodegroup of the cluster with the same
// name is magnum.NodeGroupAlreadyExists.
func (s *Store) CreateNodeGroup(ctx context.Context, ng *NodeGroup) (row *NodeGroup, created bool, err error) {
	if ng == nil {
		return nil, false, errors.New("create nodegroup: no nodegroup")
	}
	cols, err := s.nodeGroupInsertValues(ng, s.timestamp())
	if err != nil {
		return nil, false, fmt.Errorf("create nodegroup: %w", err)
	}
	retried := false
	err = s.inTx(ctx, func(ctx context.Context, tx *sql.Tx, maybeApplied bool) error {
		created, retried = false, retried || maybeApplied
		if err := s.insert(ctx, tx, nodegroupTable, cols); err != nil {
			if s.isDuplicate(err) {
				if existing, gerr := s.selectOne(ctx, s.db, nodegroupTable, s.quote("uuid")+" = ?", ng.UUID); gerr == nil {
					if existing.strOr("cluster_id", "") != ng.ClusterID {
						return fmt.Errorf("nodegroup uuid %s is taken by cluster %s", ng.UUID, existing.strOr("cluster_id", ""))
					}
					return errDuplicate
				}
				return magnum.NodeGroupAlreadyExists(ng.Name, ng.ClusterID)
			}
			return err
		}
		created = true
		return nil
	})
	if err != nil && !errors.Is(err, errDuplicate) {
		return nil, false, opError("create nodegroup "+ng.UUID, err)
	}
	row, err = s.GetNodeGroup(ctx, ng.ClusterID, ng.UUID)
	if err == nil && !created && retried {
		for _, c := range cols {
			if c.col.name == "created_at" && row.CreatedAt.Equal(c.value.(time.Time)) {
				created = true
			}
		}
	}
	return row, created, err
}

// GetNodeGroup reads a nodegroup of a cluster by uuid; magnum.NodeGroupNotFound if the cluster
// has none such.
func (s *Store) GetNodeGroup(ctx context.Context, clusterUUID, uuid string) (*NodeGroup, error) {
	row, err := s.readOne(ctx, nodegroupTable, s.quote("cluster_id")+" = ? AND "+s.quote("uuid")+" = ?", clusterUUID, uuid)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, magnum.NodeGroupNotFound(uuid)
	}
	if err != nil {
		return nil, opError("get nodegroup "+uuid, err)
	}
	return nodeGroupFrom(row)
}

// ListNodeGroups lists a cluster's nodegroups by id (default master first, then default worker,
// then the others, as they were created).
func (s *Store) ListNodeGroups(ctx context.Context, clusterUUID string) ([]*NodeGroup, error) {
	rows, err := s.readMany(ctx, nodegroupTable, s.quote("cluster_id")+" = ? ORDER BY "+s.quote("id"), clusterUUID)
	if err != nil {
		return nil, opError("list nodegroups of cluster "+clusterUUID, err)
	}
	out := make([]*NodeGroup, 0, len(rows))
	for _, r := range rows {
		ng, err := nodeGroupFrom(r)
		if err != nil {
			return nil, err
		}
		out = append(out, ng)
	}
	return out, nil
}

// UpdateNodeGroup sets columns of a nodegroup (plus updated_at) if the guard holds (the guard's
// status is the nodegroup's). Missing: magnum.NodeGroupNotFound.
func (s *Store) UpdateNodeGroup(ctx context.Context, clusterUUID, uuid string, set Fields, g Guard) (*NodeGroup, error) {
	row, err := s.guardedUpdate(ctx, nodegroupTable, uuid, s.quote("cluster_id")+" = ? AND "+s.quote("uuid")+" = ?",
		[]any{clusterUUID, uuid}, set, g, func() error { return magnum.NodeGroupNotFound(uuid) })
	if err != nil {
		return nil, opError("update nodegroup "+uuid, err)
	}
	return nodeGroupFrom(row)
}

// DeleteNodeGroup deletes a nodegroup of a cluster. Deleting one that is gone is not an error.
func (s *Store) DeleteNodeGroup(ctx context.Context, clusterUUID, uuid string) (deleted bool, err error) {
	err = s.inTx(ctx, func(ctx context.Context, tx *sql.Tx, maybeApplied bool) error {
		res, err := s.exec(ctx, tx, fmt.Sprintf("DELETE FROM %s WHERE %s = ? AND %s = ?",
			s.quote("nodegroup"), s.quote("cluster_id"), s.quote("uuid")), clusterUUID, uuid)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		deleted = err == nil && n > 0
		return err
	})
	return deleted, opError("delete nodegroup "+uuid, err)
}
