package postgres

import "context"

// SyncCommitSetting is the synchronous_commit setting of a connection of
// s's pool (with MaxConns 1, the connection every call uses).
func SyncCommitSetting(ctx context.Context, s *Store) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&v)
	return v, err
}
