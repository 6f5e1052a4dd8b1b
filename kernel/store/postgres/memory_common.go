package postgres

import (
	"context"
	"sync"
	"time"
)

// CommonShare is the share of the chunks from which a lexeme is common: a
// common lexeme of a query ranks the chunks the query's other lexemes
// select, but selects none itself (RATIONALE.md, "Memory on PostgreSQL:
// common lexemes rank, rare lexemes select"). A query whose lexemes are
// all common is selected by its rarest one.
const CommonShare = 0.01

// commonTTL is how long the common lexemes read from the table's
// statistics are used before they are read again. They change when
// PostgreSQL analyzes the table (autovacuum, or ANALYZE).
const commonTTL = time.Minute

// commonLexemes caches the table's common lexemes and their shares.
// Safe for concurrent use.
type commonLexemes struct {
	mu     sync.Mutex
	at     time.Time
	lex    []string
	shares []float32
}

// commonSQL reads the lexemes of ak_memory_chunks.tsv that PostgreSQL's
// statistics (pg_stats.most_common_elems, gathered by ANALYZE) put in at
// least $1 of the rows. Without statistics (a table never analyzed) it
// returns none, and every lexeme selects. most_common_elem_freqs has
// three more entries than most_common_elems (minimum, maximum, null
// share): unnest pads the lexemes with NULLs there.
const commonSQL = `SELECT x.e, x.f
FROM pg_catalog.pg_stats AS s,
     unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS x(e, f)
WHERE s.schemaname = current_schema() AND s.tablename = 'ak_memory_chunks' AND s.attname = 'tsv'
  AND x.e IS NOT NULL AND x.f >= $1`

// common returns the common lexemes and their shares, read at most once
// a commonTTL.
func (m *MemoryIndex) common(ctx context.Context) ([]string, []float32, error) {
	c := &m.commons
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < commonTTL {
		return c.lex, c.shares, nil
	}
	var lex []string
	var shares []float32
	err := m.s.retry(ctx, func(ctx context.Context) error {
		lex, shares = nil, nil
		rows, err := m.s.pool.Query(ctx, commonSQL, float32(CommonShare))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l string
			var f float32
			if err := rows.Scan(&l, &f); err != nil {
				return err
			}
			lex, shares = append(lex, l), append(shares, f)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, nil, m.s.classify("memory index: read the common lexemes", err)
	}
	c.at, c.lex, c.shares = time.Now(), lex, shares
	return lex, shares, nil
}

// selectSQL is the tsquery that selects the chunks a query text ($1)
// ranks: its lexemes not in the common list ($2, with their shares $3)
// or, when every lexeme is common, the rarest one. Lexemes are made as
// ak_memory_query makes them (english stems, CJK characters one by one)
// and quoted as it quotes them. SearchText asks for it first and
// searches then, so the planner sees the tsquery it plans for: in one
// statement the selection was unknown when planned, and PostgreSQL
// scanned every row of a 10k table (RATIONALE.md).
const selectSQL = `WITH l AS (
    SELECT x.l, coalesce(c.f, 0) AS f
    FROM unnest(tsvector_to_array(to_tsvector('english'::regconfig, $1) ||
                                  to_tsvector('simple'::regconfig, ak_memory_cjk($1)))) AS x(l)
    LEFT JOIN unnest($2::text[], $3::real[]) AS c(l, f) ON c.l = x.l)
SELECT array_to_string(array(
    SELECT '''' || replace(replace(p.l, '\', '\\'), '''', '''''') || '''' FROM (
        SELECT l FROM l WHERE f = 0
        UNION ALL
        (SELECT l FROM l WHERE NOT EXISTS (SELECT FROM l WHERE f = 0) ORDER BY f, l LIMIT 1)) AS p), ' | ')`

// searchTextSQL ranks the scope's chunks (the filter where, its
// arguments from $1) by ts_rank against every lexeme of the query text
// among those its selection (selectSQL) matches.
const searchTextSQL = `SELECT %[4]s, ts_rank(tsv, q, 1) AS score
FROM ak_memory_chunks, ak_memory_query($%[1]d) AS q
WHERE tsv @@ $%[2]d::tsquery AND owner = $1%[5]s
ORDER BY score DESC, id LIMIT $%[3]d`
