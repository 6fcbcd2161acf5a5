package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
)

// CreateX509KeyPair stores a key pair (the x509keypair cert manager: four per cluster). A uuid
// already present is returned as is with created=false (a retried or redelivered store).
func (s *Store) CreateX509KeyPair(ctx context.Context, k *X509KeyPair) (row *X509KeyPair, created bool, err error) {
	if k == nil || k.UUID == "" {
		return nil, false, errors.New("create x509keypair: the key pair needs a uuid")
	}
	vals := k.values()
	if k.CreatedAt.IsZero() {
		vals["created_at"] = s.timestamp()
	}
	cols, err := s.encodeValues(x509Table, vals, true)
	if err != nil {
		return nil, false, fmt.Errorf("create x509keypair %s: %w", k.UUID, err)
	}
	err = s.inTx(ctx, func(ctx context.Context, tx *sql.Tx, maybeApplied bool) error {
		created = false
		if err := s.insert(ctx, tx, x509Table, cols); err != nil {
			if s.isDuplicate(err) {
				return errDuplicate
			}
			return err
		}
		created = true
		return nil
	})
	if err != nil && !errors.Is(err, errDuplicate) {
		return nil, false, opError("create x509keypair "+k.UUID, err)
	}
	row, err = s.GetX509KeyPair(ctx, k.UUID)
	return row, created, err
}

// GetX509KeyPair reads a key pair by uuid; magnum.X509KeyPairNotFound if none.
func (s *Store) GetX509KeyPair(ctx context.Context, uuid string) (*X509KeyPair, error) {
	row, err := s.readOne(ctx, x509Table, s.quote("uuid")+" = ?", uuid)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, magnum.X509KeyPairNotFound(uuid)
	}
	if err != nil {
		return nil, opError("get x509keypair "+uuid, err)
	}
	return x509From(row), nil
}

// DeleteX509KeyPair deletes a key pair; one already gone is not an error.
func (s *Store) DeleteX509KeyPair(ctx context.Context, uuid string) (deleted bool, err error) {
	err = s.inTx(ctx, func(ctx context.Context, tx *sql.Tx, maybeApplied bool) error {
		res, err := s.exec(ctx, tx, fmt.Sprintf("DELETE FROM %s WHERE %s = ?", s.quote("x509keypair"), s.quote("uuid")), uuid)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		deleted = err == nil && n > 0
		return err
	})
	return deleted, opError("delete x509keypair "+uuid, err)
}

// ClusterKeyPair is one of a cluster's key pairs and the cluster column that refers to it.
type ClusterKeyPair struct {
	// RefColumn is ca_cert_ref, etcd_ca_cert_ref, front_proxy_ca_cert_ref or magnum_cert_ref.
	RefColumn string
	KeyPair   *X509KeyPair
}

var clusterRefColumns = []string{"ca_cert_ref", "etcd_ca_cert_ref", "front_proxy_ca_cert_ref", "magnum_cert_ref"}

// StoreClusterKeyPairs stores a cluster's key pairs and points the cluster row's ref columns at
// them (plus updated_at = now), in one transaction: all of it is written, or nothing. The pairs'
// uuids are chosen by the caller, derived from the cluster's (certs.ClusterRefs), so that a retry,
// a redelivery or another replica finds what an earlier attempt stored:
//
//   - none of the uuids is taken: the rows are inserted in the order given (ids ascending),
//     created_at = now unless set; stored is true;
//   - all of them are (an earlier attempt's set, or this call's own after a lost commit
//     acknowledgement): those rows are kept and the cluster refers to them; stored is false, and
//     the caller reads them;
//   - some are: a set written one row at a time that stopped midway (earlier versions of the
//     bridge). Nothing can have trusted it, and its client certificate need not be signed by the
//     CA next to it: it is replaced by pairs; stored is true.
//
// A cluster without a row is magnum.ClusterNotFound, and nothing is written. The common case is
// four statements: BEGIN, one INSERT of every row, the cluster's UPDATE, COMMIT.
func (s *Store) StoreClusterKeyPairs(ctx context.Context, clusterUUID string, pairs []ClusterKeyPair) (stored bool, err error) {
	op := "store key pairs of cluster " + clusterUUID
	if clusterUUID == "" || len(pairs) == 0 {
		return false, errors.New(op + ": a cluster uuid and key pairs are needed")
	}
	now := s.timestamp()
	rows := make([][]encodedCol, len(pairs))
	uuids := make([]any, len(pairs))
	refs := Fields{}
	seen := map[string]bool{}
	for i, p := range pairs {
		if p.KeyPair == nil || p.KeyPair.UUID == "" || seen[p.KeyPair.UUID] {
			return false, fmt.Errorf("%s: key pair %d needs a uuid of its own", op, i)
		}
		if _, dup := refs[p.RefColumn]; dup || !slices.Contains(clusterRefColumns, p.RefColumn) {
			return false, fmt.Errorf("%s: %q is not one of %v, or given twice", op, p.RefColumn, clusterRefColumns)
		}
		seen[p.KeyPair.UUID] = true
		refs[p.RefColumn] = p.KeyPair.UUID
		uuids[i] = p.KeyPair.UUID
		vals := p.KeyPair.values()
		if p.KeyPair.CreatedAt.IsZero() {
			vals["created_at"] = now
		}
		if rows[i], err = s.encodeValues(x509Table, vals, true); err != nil {
			return false, fmt.Errorf("%s: %w", op, err)
		}
	}
	refs["updated_at"] = now
	set, err := s.encodeValues(clusterTable, refs, false)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	assign := make([]string, len(set))
	setArgs := make([]any, 0, len(set)+1)
	for i, c := range set {
		assign[i] = s.quote(c.col.name) + " = ?"
		setArgs = append(setArgs, c.value)
	}
	setArgs = append(setArgs, clusterUUID)
	update := fmt.Sprintf("UPDATE %s SET %s WHERE %s = ?", s.quote(clusterTable.name), strings.Join(assign, ", "), s.quote("uuid"))
	inUUIDs := fmt.Sprintf("%s IN (%s)", s.quote("uuid"), placeholders(len(uuids)))

	err = s.inTx(ctx, func(ctx context.Context, tx *sql.Tx, _ bool) error {
		stored = false
		inserted := 0
		res, err := s.insertRows(ctx, tx, x509Table, rows, s.skipDuplicates("uuid"))
		switch {
		case err == nil:
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			inserted = int(n)
		case !s.isDuplicate(err): // a duplicate (MySQL) inserted none
			return err
		}
		keep := false
		if inserted == 0 {
			// Someone's set: lock what there is of it, so that it stays until this commit.
			present, err := s.selectRows(ctx, tx, x509Table, inUUIDs+" FOR UPDATE", uuids...)
			if err != nil {
				return err
			}
			keep = len(present) == len(rows)
		}
		switch {
		case keep:
		case inserted == len(rows):
			stored = true
		default: // a partial set, or gone since the INSERT: this call's pairs replace it
			if _, err := s.exec(ctx, tx, fmt.Sprintf("DELETE FROM %s WHERE %s", s.quote(x509Table.name), inUUIDs), uuids...); err != nil {
				return err
			}
			if _, err := s.insertRows(ctx, tx, x509Table, rows, ""); err != nil {
				return err
			}
			stored = true
		}
		res, err = s.exec(ctx, tx, update, setArgs...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err == nil && n == 0 {
			err = magnum.ClusterNotFound(clusterUUID)
		}
		return err
	})
	return stored, opError(op, err)
}
