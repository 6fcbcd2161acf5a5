package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
)

// ErrConflict: a guarded write found the row changed by someone else. Test with errors.Is; the
// error is a *ConflictError saying what was found.
var ErrConflict = errors.New("row changed concurrently")

// ConflictError is a guard that did not hold.
type ConflictError struct {
	Table, UUID string
	// Status and UpdatedAt are the row's values when the guard was checked.
	Status    magnum.ClusterStatus
	UpdatedAt *time.Time
	Reason    string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s %s: %v: %s", e.Table, e.UUID, ErrConflict, e.Reason)
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// Guard makes an update conditional, against lost updates between bridge replicas or a change
// magnum-api made meanwhile. The zero Guard always holds.
type Guard struct {
	// StatusIn: the row's status must be one of these (an empty list: any status).
	StatusIn []magnum.ClusterStatus
	// CheckUpdatedAt: the row's updated_at must still be UpdatedAt (nil: still NULL). Magnum
	// stores whole seconds, so this cannot see a change made within the same second; combine it
	// with StatusIn where a status transition is what matters.
	CheckUpdatedAt bool
	UpdatedAt      *time.Time
	// Unset: these columns must still be NULL or empty, e.g. a cluster's certificate refs that
	// only the first of concurrent attempts may set.
	Unset []string
}

// IfStatus is a Guard on the current status.
func IfStatus(statuses ...magnum.ClusterStatus) Guard { return Guard{StatusIn: statuses} }

// IfUnchangedSince is a Guard on updated_at, typically the value read before deciding.
func IfUnchangedSince(updatedAt *time.Time) Guard {
	return Guard{CheckUpdatedAt: true, UpdatedAt: updatedAt}
}

func (g Guard) check(t *table, uuid string, row scanned) error {
	status := magnum.ClusterStatus(row.strOr("status", ""))
	updated := row.time("updated_at")
	fail := func(reason string) error {
		return &ConflictError{Table: t.name, UUID: uuid, Status: status, UpdatedAt: updated, Reason: reason}
	}
	if len(g.StatusIn) > 0 && !magnum.StatusIn(status, g.StatusIn) {
		return fail(fmt.Sprintf("status is %q, not one of %v", status, g.StatusIn))
	}
	if g.CheckUpdatedAt {
		want := g.UpdatedAt
		switch {
		case want == nil && updated != nil:
			return fail(fmt.Sprintf("updated at %s since it was read", updated.Format(time.DateTime)))
		case want != nil && (updated == nil || !updated.Equal(want.UTC().Truncate(time.Second))):
			got := "never"
			if updated != nil {
				got = updated.Format(time.DateTime)
			}
			return fail(fmt.Sprintf("updated_at is %s, expected %s", got, want.UTC().Format(time.DateTime)))
		}
	}
	for _, col := range g.Unset {
		if v := row.strOr(col, ""); v != "" {
			return fail(fmt.Sprintf("%s is set already", col))
		}
	}
	return nil
}

// presentColumns are the table's columns that exist in this database.
func (s *Store) presentColumns(t *table) []column {
	var out []column
	for _, c := range t.columns {
		if s.schema.has(c, t) {
			out = append(out, c)
		}
	}
	return out
}

// selectRows runs SELECT <all present columns> FROM t WHERE <where> (with optional suffix such as
// ORDER BY or FOR UPDATE).
func (s *Store) selectRows(ctx context.Context, q querier, t *table, where string, args ...any) ([]scanned, error) {
	cols := s.presentColumns(t)
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	query := fmt.Sprintf("SELECT %s FROM %s WHERE %s", s.quoteCols(names), s.quote(t.name), where)
	rows, err := s.query(ctx, q, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []scanned
	for rows.Next() {
		targets := make([]any, len(cols))
		row := scanned{}
		for i, c := range cols {
			targets[i] = scanTarget(c)
			row[c.name] = targets[i]
		}
		if err := rows.Scan(targets...); err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

func (s *Store) selectOne(ctx context.Context, q querier, t *table, where string, args ...any) (scanned, error) {
	rows, err := s.selectRows(ctx, q, t, where, args...)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, sql.ErrNoRows
	}
	return rows[0], nil
}

// encodedCol is one column assignment, already in its stored form.
type encodedCol struct {
	col   column
	value any
}

// encodeValues validates and encodes column values for t. Columns the schema lacks are an error
// when they hold a value, and skipped when NULL/empty (a 23.0.0 schema has no trust columns to
// write NULL into).
func (s *Store) encodeValues(t *table, vals map[string]any, skipUnset bool) ([]encodedCol, error) {
	names := make([]string, 0, len(vals))
	for n := range vals {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []encodedCol
	for _, n := range names {
		c, ok := t.column(n)
		if !ok {
			return nil, fmt.Errorf("table %s has no column %q", t.name, n)
		}
		v, err := encode(c, vals[n])
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.name, err)
		}
		if !s.schema.has(c, t) {
			if isEmptyValue(vals[n]) {
				continue
			}
			return nil, fmt.Errorf("table %s: column %q does not exist in this database (%s)", t.name, n, s.schema.Release())
		}
		if skipUnset && v == nil {
			continue // leave NULL to the column's own default (there are none besides NULL)
		}
		out = append(out, encodedCol{c, v})
	}
	return out, nil
}

// isEmptyValue: nil, a nil pointer, "", a zero time, or an empty dict/list.
func isEmptyValue(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		return rv.IsNil()
	case reflect.String, reflect.Slice, reflect.Map:
		return rv.Len() == 0
	}
	if d, ok := v.(magnum.Dict); ok {
		return d.Len() == 0
	}
	if t, ok := v.(time.Time); ok {
		return t.IsZero()
	}
	return false
}

func (s *Store) insert(ctx context.Context, tx *sql.Tx, t *table, cols []encodedCol) error {
	names := make([]string, len(cols))
	args := make([]any, len(cols))
	for i, c := range cols {
		names[i], args[i] = c.col.name, c.value
	}
	_, err := s.exec(ctx, tx, fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", s.quote(t.name), s.quoteCols(names), placeholders(len(cols))), args...)
	return err
}

// insertRows inserts rows into t with one statement, ending it with suffix (e.g. the dialect's
// skipDuplicates). The statement names every column any row sets; a row that does not set one
// writes NULL there, as its own INSERT would have left it.
func (s *Store) insertRows(ctx context.Context, tx *sql.Tx, t *table, rows [][]encodedCol, suffix string) (sql.Result, error) {
	var names []string
	index := map[string]int{}
	for _, row := range rows {
		for _, c := range row {
			if _, ok := index[c.col.name]; !ok {
				index[c.col.name] = len(names)
				names = append(names, c.col.name)
			}
		}
	}
	args := make([]any, 0, len(rows)*len(names))
	tuples := make([]string, len(rows))
	one := "(" + placeholders(len(names)) + ")"
	for i, row := range rows {
		vals := make([]any, len(names))
		for _, c := range row {
			vals[index[c.col.name]] = c.value
		}
		args = append(args, vals...)
		tuples[i] = one
	}
	return s.exec(ctx, tx, fmt.Sprintf("INSERT INTO %s (%s) VALUES %s%s", s.quote(t.name), s.quoteCols(names),
		strings.Join(tuples, ", "), suffix), args...)
}

// matches reports whether the row already holds every assignment (used to recognise a write
// whose commit succeeded although the client saw an error).
func matches(row scanned, cols []encodedCol) bool {
	for _, c := range cols {
		var have any
		switch c.col.kind {
		case kInt:
			if p := row.int(c.col.name); p != nil {
				have = *p
			}
		case kBool:
			if v, ok := row[c.col.name].(*sql.NullBool); ok && v.Valid {
				have = v.Bool
			}
		case kTime:
			if p := row.time(c.col.name); p != nil {
				have = *p
			}
		default:
			if p := row.str(c.col.name); p != nil {
				have = *p
			}
		}
		if ht, ok := have.(time.Time); ok {
			wt, ok := c.value.(time.Time)
			if !ok || !ht.Equal(wt) {
				return false
			}
			continue
		}
		if have != c.value {
			return false
		}
	}
	return true
}

// guardedUpdate updates the one row selected by where: it locks the row, checks the guard, sets
// the fields plus updated_at, and returns the row as it is afterwards. When the previous attempt
// failed at COMMIT it first checks whether that attempt's write is there (exactly these values,
// same updated_at included), and if so reports success without writing again.
func (s *Store) guardedUpdate(ctx context.Context, t *table, uuid, where string, whereArgs []any, set Fields, g Guard,
	notFound func() error) (scanned, error) {
	for _, forbidden := range []string{"id", "uuid", "created_at", "updated_at"} {
		if _, ok := set[forbidden]; ok {
			return nil, fmt.Errorf("table %s: %s cannot be updated", t.name, forbidden)
		}
	}
	if len(set) == 0 && !g.CheckUpdatedAt && len(g.StatusIn) == 0 && len(g.Unset) == 0 {
		return nil, fmt.Errorf("table %s: nothing to update", t.name)
	}
	cols, err := s.encodeValues(t, set, false)
	if err != nil {
		return nil, err
	}
	updatedAt, _ := t.column("updated_at")
	cols = append(cols, encodedCol{updatedAt, s.timestamp()})

	var result scanned
	err = s.inTx(ctx, func(ctx context.Context, tx *sql.Tx, maybeApplied bool) error {
		row, err := s.selectOne(ctx, tx, t, where+" FOR UPDATE", whereArgs...)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound()
		}
		if err != nil {
			return err
		}
		if maybeApplied && matches(row, cols) {
			result = row
			return nil
		}
		if err := g.check(t, uuid, row); err != nil {
			return err
		}
		assign := make([]string, len(cols))
		args := make([]any, 0, len(cols)+1)
		for i, c := range cols {
			assign[i] = s.quote(c.col.name) + " = ?"
			args = append(args, c.value)
		}
		id := row.int("id")
		args = append(args, *id)
		if _, err := s.exec(ctx, tx, fmt.Sprintf("UPDATE %s SET %s WHERE %s = ?", s.quote(t.name), strings.Join(assign, ", "), s.quote("id")), args...); err != nil {
			return err
		}
		result, err = s.selectOne(ctx, tx, t, s.quote("id")+" = ?", *id)
		return err
	})
	return result, err
}

// readOne runs a retried single-row read.
func (s *Store) readOne(ctx context.Context, t *table, where string, args ...any) (scanned, error) {
	var row scanned
	err := s.retry(ctx, func(int) error {
		var err error
		row, err = s.selectOne(ctx, s.db, t, where, args...)
		return err
	})
	return row, err
}

// readMany runs a retried multi-row read.
func (s *Store) readMany(ctx context.Context, t *table, where string, args ...any) ([]scanned, error) {
	var rows []scanned
	err := s.retry(ctx, func(int) error {
		var err error
		rows, err = s.selectRows(ctx, s.db, t, where, args...)
		return err
	})
	return rows, err
}

// opError adds the operation and table to a database error; magnum exceptions, conflicts and
// context errors pass through unchanged.
func opError(op string, err error) error {
	if err == nil {
		return nil
	}
	var me *magnum.Exception
	var ce *ConflictError
	if errors.As(err, &me) || errors.As(err, &ce) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}
