package postgres

import (
	"cmp"
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/memory"
)

// MemoryIndex is memory's index in the session database (memory.Index):
// the chunks in ak_memory_chunks, searched with PostgreSQL's own full-text
// search (a generated tsvector, english configuration, under GIN) and, for
// vectors, an exact cosine scan of the scope's embeddings in Go (Debian's
// PostgreSQL 15 has no pgvector). A store's session delete (and its TTL
// sweep, and gc) removes the session's chunks in the same transaction.
// docs/memory.md, "PostgreSQL"; RATIONALE.md, "Memory on PostgreSQL".
type MemoryIndex struct {
	s       *Store
	closed  atomic.Bool
	commons commonLexemes
}

// MemoryIndex returns the store's memory index. Closing the index does not
// close the store.
func (s *Store) MemoryIndex() *MemoryIndex { return &MemoryIndex{s: s} }

var _ memory.Index = (*MemoryIndex)(nil)

func (m *MemoryIndex) usable() error {
	if m.closed.Load() {
		return memory.ErrClosed
	}
	return m.s.usable()
}

// pgText makes text storable in a PostgreSQL text column, which holds
// neither NUL nor invalid UTF-8: each becomes U+FFFD. Chunks are the
// scrubbed stored text, which the session keeps whole; the index only
// needs to find it.
func pgText(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// encodeVector is v as little-endian float32s.
func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// Add writes the batch's chunks and marks in one transaction. A chunk
// added again replaces the stored one.
func (m *MemoryIndex) Add(ctx context.Context, b memory.Batch) error {
	if err := m.usable(); err != nil {
		return err
	}
	dims := 0
	for i := range b.Chunks {
		c := &b.Chunks[i]
		if err := c.Validate(); err != nil {
			return fmt.Errorf("memory index: %w", err)
		}
		if n := len(c.Vector); n > 0 {
			if dims != 0 && n != dims {
				return fmt.Errorf("memory index: chunk %q: vector of %d dimensions, the batch's are %d: %w", c.ID, n, dims, memory.ErrDimension)
			}
			dims = n
		}
	}
	if len(b.Chunks) == 0 && len(b.Marks) == 0 {
		return nil
	}
	// A chunk given twice in one batch: the later one wins, as if added
	// after (one INSERT cannot update a row twice).
	chunks := b.Chunks
	last := make(map[string]int, len(chunks))
	for i := range chunks {
		last[chunks[i].ID] = i
	}
	if len(last) < len(chunks) {
		kept := make([]memory.Chunk, 0, len(last))
		for i := range chunks {
			if last[chunks[i].ID] == i {
				kept = append(kept, chunks[i])
			}
		}
		chunks = kept
	}
	n := len(chunks)
	ids, sessions, owners, workspaces := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	seqs, parts := make([]int64, n), make([]int32, n)
	roles, tools, bodies := make([]string, n), make([]string, n), make([]string, n)
	times := make([]time.Time, n)
	vectors := make([][]byte, n)
	for i := range chunks {
		c := &chunks[i]
		ids[i], sessions[i], owners[i], workspaces[i] = c.ID, c.SessionID, c.Owner, c.Workspace
		seqs[i], parts[i] = int64(c.Seq), int32(c.Part)
		roles[i], tools[i], bodies[i] = c.Role, c.Tool, pgText(c.Text)
		times[i] = c.Time
		if times[i].IsZero() {
			times[i] = time.Unix(0, 0)
		}
		if len(c.Vector) > 0 {
			vectors[i] = encodeVector(c.Vector)
		}
	}
	markIDs := make([]string, 0, len(b.Marks))
	for id := range b.Marks {
		markIDs = append(markIDs, id)
	}
	slices.Sort(markIDs)
	markSeqs := make([]int64, len(markIDs))
	for i, id := range markIDs {
		markSeqs[i] = int64(b.Marks[id])
	}
	err := m.s.retry(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, m.s.pool, func(tx pgx.Tx) error {
			if dims > 0 {
				var have int
				if err := tx.QueryRow(ctx, `SELECT dims FROM ak_memory_meta FOR UPDATE`).Scan(&have); err != nil {
					return err
				}
				switch have {
				case 0:
					if _, err := tx.Exec(ctx, `UPDATE ak_memory_meta SET dims = $1`, dims); err != nil {
						return err
					}
				case dims:
				default:
					return fmt.Errorf("vectors of %d dimensions, the index holds %d: %w", dims, have, memory.ErrDimension)
				}
			}
			if n > 0 {
				if _, err := tx.Exec(ctx, `
INSERT INTO ak_memory_chunks (id, session_id, owner, workspace, seq, part, role, tool, time, body, vector)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::integer[],
                     $7::text[], $8::text[], $9::timestamptz[], $10::text[], $11::bytea[])
ON CONFLICT (id) DO UPDATE SET session_id = EXCLUDED.session_id, owner = EXCLUDED.owner,
    workspace = EXCLUDED.workspace, seq = EXCLUDED.seq, part = EXCLUDED.part, role = EXCLUDED.role,
    tool = EXCLUDED.tool, time = EXCLUDED.time, body = EXCLUDED.body, vector = EXCLUDED.vector`,
					ids, sessions, owners, workspaces, seqs, parts, roles, tools, times, bodies, vectors); err != nil {
					return err
				}
			}
			if len(markIDs) > 0 {
				if _, err := tx.Exec(ctx, `
INSERT INTO ak_memory_marks (session_id, seq) SELECT * FROM unnest($1::text[], $2::bigint[])
ON CONFLICT (session_id) DO UPDATE SET seq = EXCLUDED.seq`, markIDs, markSeqs); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return m.s.classify("memory index: add", err)
	}
	return nil
}

// scopeFilter is the WHERE clause (after "owner = $1") of scope s, with
// its one argument ($2), if any.
func scopeFilter(s memory.Scope) (string, []any, error) {
	if err := s.Validate(); err != nil {
		return "", nil, err
	}
	switch s.Kind {
	case memory.ScopeSession:
		return " AND session_id = $2", []any{s.Owner, s.SessionID}, nil
	case memory.ScopeWorkspace:
		return " AND workspace = $2", []any{s.Owner, s.Workspace}, nil
	}
	return "", []any{s.Owner}, nil
}

// chunkColumns are the columns scanChunk reads.
const chunkColumns = `id, session_id, owner, workspace, seq, part, role, tool, time, body`

func scanChunk(row pgx.CollectableRow, extra ...any) (memory.Chunk, error) {
	var c memory.Chunk
	var seq int64
	var part int32
	dst := append([]any{&c.ID, &c.SessionID, &c.Owner, &c.Workspace, &seq, &part, &c.Role, &c.Tool, &c.Time, &c.Text}, extra...)
	if err := row.Scan(dst...); err != nil {
		return c, err
	}
	c.Seq, c.Part = uint64(seq), int(part)
	return c, nil
}

// SearchText ranks the scope's chunks by ts_rank against any of q's
// lexemes (ak_memory_query: english stems, and CJK characters one by one).
// Only the chunks holding one of q's rare lexemes are ranked: a lexeme in
// CommonShare of the chunks or more (the table's statistics say) ranks but
// does not select, so a query is not scored against every chunk that holds
// a common word; a query of common lexemes only is selected by its rarest.
func (m *MemoryIndex) SearchText(ctx context.Context, s memory.Scope, q string, k int) ([]memory.Hit, error) {
	if err := m.usable(); err != nil {
		return nil, err
	}
	where, args, err := scopeFilter(s)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(q) == "" || k <= 0 {
		return nil, nil
	}
	lex, shares, err := m.common(ctx)
	if err != nil {
		return nil, err
	}
	n := len(args)
	sql := fmt.Sprintf(searchTextSQL, n+1, n+2, n+3, chunkColumns, where)
	var hits []memory.Hit
	err = m.s.retry(ctx, func(ctx context.Context) error {
		var sel string
		if err := m.s.pool.QueryRow(ctx, selectSQL, pgText(q), lex, shares).Scan(&sel); err != nil {
			return err
		}
		hits = nil
		if sel == "" {
			return nil // no lexeme: nothing matches
		}
		// Planned for this selection each time (an unnamed statement):
		// a cached generic plan does not know how many chunks it selects.
		rows, err := m.s.pool.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, append(args, pgText(q), sel, k)...)...)
		if err != nil {
			return err
		}
		hits, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (memory.Hit, error) {
			var score float32
			c, err := scanChunk(row, &score)
			return memory.Hit{Chunk: c, Score: float64(score), Source: memory.SourceText}, err
		})
		return err
	})
	if err != nil {
		return nil, m.s.classify("memory index: search", err)
	}
	for i := range hits {
		hits[i].Rank = i + 1
	}
	return hits, nil
}

// scored is a candidate of SearchVector.
type scored struct {
	id    string
	score float64
}

// topK is a min-heap of the best k candidates so far.
type topK []scored

func (h topK) Len() int { return len(h) }
func (h topK) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score < h[j].score
	}
	return h[i].id > h[j].id
}
func (h topK) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *topK) Push(x any)   { *h = append(*h, x.(scored)) }
func (h *topK) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// SearchVector scans the scope's vectors (an exact search: no pgvector)
// and ranks them by cosine similarity to v.
func (m *MemoryIndex) SearchVector(ctx context.Context, s memory.Scope, v []float32, k int) ([]memory.Hit, error) {
	if err := m.usable(); err != nil {
		return nil, err
	}
	where, args, err := scopeFilter(s)
	if err != nil {
		return nil, err
	}
	if k <= 0 || len(v) == 0 {
		return nil, nil
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("memory index: query vector[%d] is %v: %w", i, x, memory.ErrBadVector)
		}
	}
	var dims int
	if err := m.s.pool.QueryRow(ctx, `SELECT dims FROM ak_memory_meta`).Scan(&dims); err != nil {
		return nil, m.s.classify("memory index: search", err)
	}
	switch {
	case dims == 0:
		return nil, nil
	case dims != len(v):
		return nil, fmt.Errorf("memory index: query vector of %d dimensions, the index holds %d: %w", len(v), dims, memory.ErrDimension)
	}
	var qn float64
	for _, x := range v {
		qn += float64(x) * float64(x)
	}
	qn = math.Sqrt(qn)
	var best topK
	err = m.s.retry(ctx, func(ctx context.Context) error {
		best = best[:0]
		rows, err := m.s.pool.Query(ctx, `SELECT id, vector FROM ak_memory_chunks WHERE vector IS NOT NULL AND owner = $1`+where, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			raw := rows.RawValues()
			id, vec := string(raw[0]), raw[1]
			if len(vec) != 4*len(v) {
				continue // cannot happen: the meta row orders the writers
			}
			var dot, cn float64
			for i, x := range v {
				y := float64(math.Float32frombits(binary.LittleEndian.Uint32(vec[4*i:])))
				dot += float64(x) * y
				cn += y * y
			}
			score := 0.0
			if qn > 0 && cn > 0 {
				score = dot / (qn * math.Sqrt(cn))
			}
			c := scored{id: id, score: score}
			if best.Len() < k {
				heap.Push(&best, c)
			} else if score > best[0].score || (score == best[0].score && id < best[0].id) {
				best[0] = c
				heap.Fix(&best, 0)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, m.s.classify("memory index: search", err)
	}
	slices.SortFunc(best, func(a, b scored) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	if len(best) == 0 {
		return nil, nil
	}
	ids := make([]string, len(best))
	for i, c := range best {
		ids[i] = c.id
	}
	var chunks []memory.Chunk
	err = m.s.retry(ctx, func(ctx context.Context) error {
		rows, err := m.s.pool.Query(ctx, `SELECT `+chunkColumns+` FROM ak_memory_chunks WHERE id = ANY($1)`, ids)
		if err != nil {
			return err
		}
		chunks, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (memory.Chunk, error) { return scanChunk(row) })
		return err
	})
	if err != nil {
		return nil, m.s.classify("memory index: search", err)
	}
	byID := make(map[string]memory.Chunk, len(chunks))
	for _, c := range chunks {
		byID[c.ID] = c
	}
	hits := make([]memory.Hit, 0, len(best))
	for _, c := range best {
		ch, ok := byID[c.id]
		if !ok {
			continue // deleted between the two reads
		}
		hits = append(hits, memory.Hit{Chunk: ch, Score: c.score, Rank: len(hits) + 1, Source: memory.SourceVector})
	}
	return hits, nil
}

// Mark returns the seq session sessionID is indexed up to.
func (m *MemoryIndex) Mark(ctx context.Context, sessionID string) (uint64, error) {
	if err := m.usable(); err != nil {
		return 0, err
	}
	var seq int64
	err := m.s.retry(ctx, func(ctx context.Context) error {
		err := m.s.pool.QueryRow(ctx, `SELECT seq FROM ak_memory_marks WHERE session_id = $1`, sessionID).Scan(&seq)
		if err == pgx.ErrNoRows {
			seq = 0
			return nil
		}
		return err
	})
	if err != nil {
		return 0, m.s.classify("memory index: mark", err)
	}
	return uint64(seq), nil
}

// Marks returns every session's mark, and 0 for a session that has
// chunks but no mark (memory.Marker: the indexer's sweep removes the
// sessions the store no longer has).
func (m *MemoryIndex) Marks(ctx context.Context) (map[string]uint64, error) {
	if err := m.usable(); err != nil {
		return nil, err
	}
	rows, err := m.s.pool.Query(ctx, `SELECT session_id, seq FROM ak_memory_marks
UNION ALL SELECT DISTINCT session_id, 0 FROM ak_memory_chunks c
WHERE NOT EXISTS (SELECT 1 FROM ak_memory_marks k WHERE k.session_id = c.session_id)`)
	if err != nil {
		return nil, fmt.Errorf("memory marks: %w", err)
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var sid string
		var seq int64
		if err := rows.Scan(&sid, &seq); err != nil {
			return nil, fmt.Errorf("memory marks: %w", err)
		}
		out[sid] = uint64(seq)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory marks: %w", err)
	}
	return out, nil
}

// Pending returns up to limit chunks without a vector, oldest first.
func (m *MemoryIndex) Pending(ctx context.Context, limit int) ([]memory.Chunk, error) {
	if err := m.usable(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	var out []memory.Chunk
	err := m.s.retry(ctx, func(ctx context.Context) error {
		rows, err := m.s.pool.Query(ctx, `SELECT `+chunkColumns+` FROM ak_memory_chunks WHERE vector IS NULL ORDER BY time, id LIMIT $1`, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (memory.Chunk, error) { return scanChunk(row) })
		return err
	})
	if err != nil {
		return nil, m.s.classify("memory index: pending", err)
	}
	return out, nil
}

// DeleteSession removes the session's chunks and mark.
func (m *MemoryIndex) DeleteSession(ctx context.Context, sessionID string) error {
	if err := m.usable(); err != nil {
		return err
	}
	err := m.s.retry(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, m.s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `DELETE FROM ak_memory_chunks WHERE session_id = $1`, sessionID); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `DELETE FROM ak_memory_marks WHERE session_id = $1`, sessionID)
			return err
		})
	})
	if err != nil {
		return m.s.classify("memory index: delete session "+sessionID, err)
	}
	return nil
}

// Status counts the chunks, vectors and sessions, and the table's size
// with its indexes.
func (m *MemoryIndex) Status(ctx context.Context) (memory.Status, error) {
	if err := m.usable(); err != nil {
		return memory.Status{}, err
	}
	st := memory.Status{Backend: "postgres", Detail: "in the session database " + m.s.where}
	var dims int32
	err := m.s.retry(ctx, func(ctx context.Context) error {
		return m.s.pool.QueryRow(ctx, `
SELECT (SELECT count(*) FROM ak_memory_chunks), (SELECT count(*) FROM ak_memory_chunks WHERE vector IS NOT NULL),
       (SELECT count(*) FROM (SELECT session_id FROM ak_memory_chunks UNION SELECT session_id FROM ak_memory_marks) s),
       (SELECT dims FROM ak_memory_meta),
       pg_total_relation_size('ak_memory_chunks') + pg_total_relation_size('ak_memory_marks')`).
			Scan(&st.Chunks, &st.Vectors, &st.Sessions, &dims, &st.Bytes)
	})
	if err != nil {
		return memory.Status{}, m.s.classify("memory index: status", err)
	}
	st.Dimensions = int(dims)
	return st, nil
}

// Close makes the index refuse further calls (ErrClosed). What Add
// acknowledged is already committed; the store stays open.
func (m *MemoryIndex) Close() error {
	m.closed.Store(true)
	return nil
}

var _ memory.Marker = (*MemoryIndex)(nil)
