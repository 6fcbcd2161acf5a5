package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

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
