package dbtest_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db/dbtest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// Parallel callers each get their own database with the schema asked for, and it is gone after
// the test.
func TestFreshDatabases(t *testing.T) {
	testutil.Require(t, testutil.Integration)
	for _, c := range []struct {
		name string
		new  func(testing.TB, ...dbtest.Release) string
	}{{"mariadb", dbtest.NewMySQL}, {"postgres", dbtest.NewPostgres}} {
		t.Run(c.name, func(t *testing.T) {
			var urls []string
			var mu sync.Mutex
			t.Run("group", func(t *testing.T) {
				for _, rel := range []dbtest.Release{dbtest.Zed, dbtest.Release2024, dbtest.Release23, dbtest.Zed} {
					t.Run(rel.String(), func(t *testing.T) {
						t.Parallel()
						url := c.new(t, rel)
						mu.Lock()
						urls = append(urls, url)
						mu.Unlock()
						s, err := db.Open(context.Background(), url)
						require.NoError(t, err)
						defer s.Close()
						assert.Equal(t, rel == dbtest.Release23, s.Schema().NodeGroupLabelsTaints)
						assert.Equal(t, rel != dbtest.Zed, s.Schema().ClusterTemplateDriver)
						list, err := s.ListClustersByStatus(context.Background(), "CREATE_COMPLETE")
						require.NoError(t, err)
						assert.Empty(t, list, "a fresh database is empty")
					})
				}
			})
			require.Len(t, urls, 4)
			assert.Len(t, map[string]bool{urls[0]: true, urls[1]: true, urls[2]: true, urls[3]: true}, 4)
			for _, u := range urls {
				_, err := db.Open(context.Background(), u)
				assert.Error(t, err, "dropped after its test: %s", u)
			}
		})
	}
}
