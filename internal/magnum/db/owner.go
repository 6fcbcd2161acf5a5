package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// One bridge deployment drives the clusters of a Magnum database. Two of them on one database
// (another namespace prefix or management cluster, during a migration) would both consume
// magnum-api's messages and both resume its clusters' operations, each in its own management
// cluster. The owner is a single row of a table of the bridge's own next to Magnum's (Magnum's
// migrations leave tables they do not know alone): the deployment that holds it renews it, and
// another takes it only once it has not been renewed for a while (its owner stopped).

// ownerTable holds the database's owner; its one row has id 1.
const ownerTable = "magnum_capi_bridge_owner"

// Owner is the database's owner as recorded.
type Owner struct {
	// Deployment names the bridge deployment (the same for all its replicas); Replica is the
	// replica that renewed it last.
	Deployment, Replica string
	// Claimed is when Deployment took the database, Renewed when a replica of it last renewed it.
	Claimed, Renewed time.Time
}

// ensureOwnerTable creates the owner table when it is missing.
func (s *Store) ensureOwnerTable(ctx context.Context) error {
	if s.ownerTable.Load() {
		return nil
	}
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx, _ bool) error {
		_, err := s.exec(ctx, tx, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s INTEGER NOT NULL PRIMARY KEY, %s VARCHAR(255) NOT NULL, "+
			"%s VARCHAR(255) NOT NULL, %s BIGINT NOT NULL, %s BIGINT NOT NULL)", s.quote(ownerTable), s.quote("id"), s.quote("deployment"),
			s.quote("replica"), s.quote("claimed_at"), s.quote("renewed_at")))
		return err
	})
	if err == nil {
		s.ownerTable.Store(true)
	}
	return err
}

// ClaimOwnership makes deployment the database's owner, or renews its ownership, unless another
// deployment renewed its own within ttl. It returns the owner as it now is: held is whether that
// is deployment.
func (s *Store) ClaimOwnership(ctx context.Context, deployment, replica string, ttl time.Duration) (owner Owner, held bool, err error) {
	if deployment == "" {
		return Owner{}, false, errors.New("claim the database: no deployment name")
	}
	if err := s.ensureOwnerTable(ctx); err != nil {
		return Owner{}, false, opError("create table "+ownerTable, err)
	}
	now := s.now().UTC()
	err = s.inTx(ctx, func(ctx context.Context, tx *sql.Tx, _ bool) error {
		cur, found, err := s.readOwner(ctx, tx, true)
		if err != nil {
			return err
		}
		if !found {
			onConflict := " ON CONFLICT DO NOTHING"
			if s.name() == MySQL {
				onConflict = " ON DUPLICATE KEY UPDATE " + s.quote("id") + " = " + s.quote("id")
			}
			// Two deployments starting together: the unique id lets one row in; both read it back.
			if _, err := s.exec(ctx, tx, fmt.Sprintf("INSERT INTO %s (%s, %s, %s, %s, %s) VALUES (1, ?, ?, ?, ?)%s", s.quote(ownerTable),
				s.quote("id"), s.quote("deployment"), s.quote("replica"), s.quote("claimed_at"), s.quote("renewed_at"), onConflict),
				deployment, replica, now.Unix(), now.Unix()); err != nil {
				return err
			}
			if cur, _, err = s.readOwner(ctx, tx, true); err != nil {
				return err
			}
		}
		switch {
		case cur.Deployment == deployment:
			cur.Replica, cur.Renewed = replica, now
		case now.Sub(cur.Renewed) > ttl:
			cur = Owner{Deployment: deployment, Replica: replica, Claimed: now, Renewed: now}
		default:
			owner = cur
			return nil
		}
		if _, err := s.exec(ctx, tx, fmt.Sprintf("UPDATE %s SET %s = ?, %s = ?, %s = ?, %s = ? WHERE %s = 1", s.quote(ownerTable),
			s.quote("deployment"), s.quote("replica"), s.quote("claimed_at"), s.quote("renewed_at"), s.quote("id")),
			cur.Deployment, cur.Replica, cur.Claimed.Unix(), cur.Renewed.Unix()); err != nil {
			return err
		}
		owner = cur
		return nil
	})
	if err != nil {
		return Owner{}, false, opError("claim the database for "+deployment, err)
	}
	return owner, owner.Deployment == deployment, nil
}

// DatabaseOwner reads the database's owner without claiming it; found is false when no bridge
// deployment has claimed it yet.
func (s *Store) DatabaseOwner(ctx context.Context) (owner Owner, found bool, err error) {
	if err := s.ensureOwnerTable(ctx); err != nil {
		return Owner{}, false, opError("create table "+ownerTable, err)
	}
	owner, found, err = s.readOwner(ctx, s.db, false)
	if err != nil {
		return Owner{}, false, opError("read the database's owner", err)
	}
	return owner, found, nil
}

func (s *Store) readOwner(ctx context.Context, q querier, forUpdate bool) (Owner, bool, error) {
	query := fmt.Sprintf("SELECT %s, %s, %s, %s FROM %s WHERE %s = 1", s.quote("deployment"), s.quote("replica"),
		s.quote("claimed_at"), s.quote("renewed_at"), s.quote(ownerTable), s.quote("id"))
	if forUpdate {
		query += " FOR UPDATE"
	}
	rows, err := s.query(ctx, q, query)
	if err != nil {
		return Owner{}, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return Owner{}, false, rows.Err()
	}
	var o Owner
	var claimed, renewed int64
	if err := rows.Scan(&o.Deployment, &o.Replica, &claimed, &renewed); err != nil {
		return Owner{}, false, err
	}
	o.Claimed, o.Renewed = time.Unix(claimed, 0).UTC(), time.Unix(renewed, 0).UTC()
	return o, true, rows.Err()
}
