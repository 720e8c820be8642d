package postgresql

import (
	"fmt"
	"strings"
)

// What the config check can tell from a query's text without a server: one
// statement, that it reads, no parameters, the value column named. The
// server has the last word (a READ ONLY transaction, the extended protocol
// refusing a second statement); this is for errors at check-config time.

type tokenKind int

const (
	tokIdent  tokenKind = iota // unquoted: lower-cased, as PostgreSQL folds it
	tokQuoted                  // "quoted identifier", as written
	tokParam                   // $1
	tokString                  // any string constant
	tokSymbol                  // one other character (digits included)
)

type token struct {
	kind tokenKind
	text string
	pos  int
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c == '$' || c >= '0' && c <= '9' }

// lex splits q into tokens, skipping blanks and comments.
func lex(q string) ([]token, error) {
	var out []token
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case strings.HasPrefix(q[i:], "--"):
			if j := strings.IndexByte(q[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = len(q)
			}
		case strings.HasPrefix(q[i:], "/*"):
			depth, j := 1, i+2
			for depth > 0 && j < len(q) {
				switch {
				case strings.HasPrefix(q[j:], "/*"):
					depth, j = depth+1, j+2
				case strings.HasPrefix(q[j:], "*/"):
					depth, j = depth-1, j+2
				default:
					j++
				}
			}
			if depth > 0 {
				return nil, fmt.Errorf("unterminated /* comment at offset %d", i)
			}
			i = j
		case c == '\'':
			j, err := endOfString(q, i, false)
			if err != nil {
				return nil, err
			}
			out = append(out, token{tokString, q[i:j], i})
			i = j
		case c == '"':
			j := i + 1
			var b strings.Builder
			for {
				k := strings.IndexByte(q[j:], '"')
				if k < 0 {
					return nil, fmt.Errorf("unterminated quoted identifier at offset %d", i)
				}
				b.WriteString(q[j : j+k])
				j += k + 1
				if j < len(q) && q[j] == '"' {
					b.WriteByte('"')
					j++
					continue
				}
				break
			}
			out = append(out, token{tokQuoted, b.String(), i})
			i = j
		case c == '$' && i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9':
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			out = append(out, token{tokParam, q[i:j], i})
			i = j
		case c == '$':
			// $tag$ ... $tag$ (or $$ ... $$)
			j := i + 1
			for j < len(q) && q[j] != '$' && isIdentChar(q[j]) {
				j++
			}
			if j >= len(q) || q[j] != '$' {
				out = append(out, token{tokSymbol, "$", i})
				i++
				continue
			}
			tag := q[i : j+1]
			k := strings.Index(q[j+1:], tag)
			if k < 0 {
				return nil, fmt.Errorf("unterminated %s string at offset %d", tag, i)
			}
			end := j + 1 + k + len(tag)
			out = append(out, token{tokString, q[i:end], i})
			i = end
		case isIdentStart(c):
			j := i + 1
			for j < len(q) && isIdentChar(q[j]) {
				j++
			}
			word := q[i:j]
			if j < len(q) && q[j] == '\'' && strings.EqualFold(word, "e") {
				// E'...': backslash escapes
				end, err := endOfString(q, j, true)
				if err != nil {
					return nil, err
				}
				out = append(out, token{tokString, q[i:end], i})
				i = end
				continue
			}
			out = append(out, token{tokIdent, strings.ToLower(word), i})
			i = j
		default:
			out = append(out, token{tokSymbol, string(c), i})
			i++
		}
	}
	return out, nil
}

// endOfString returns the offset just past the string constant at q[i].
func endOfString(q string, i int, backslash bool) (int, error) {
	for j := i + 1; j < len(q); j++ {
		switch {
		case backslash && q[j] == '\\':
			j++
		case q[j] == '\'' && j+1 < len(q) && q[j+1] == '\'':
			j++
		case q[j] == '\'':
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string constant at offset %d", i)
}

type queryError struct{ field, msg string }

// readKeywords are the statements a metric query may be.
var readKeywords = map[string]bool{"select": true, "with": true, "values": true, "table": true}

// starAfter are the tokens after which * is a column list, not a product
// or count(*).
var starAfter = map[string]bool{"select": true, "distinct": true, "all": true, ",": true, ".": true}

// checkQuery checks q and that it names valueColumn (or selects *).
func checkQuery(q, valueColumn string) *queryError {
	if q == "" {
		return &queryError{".query", "required"}
	}
	toks, err := lex(q)
	if err != nil {
		return &queryError{".query", err.Error()}
	}
	if len(toks) == 0 {
		return &queryError{".query", "only comments: no statement"}
	}
	for i, t := range toks {
		if t.kind == tokSymbol && t.text == ";" && i != len(toks)-1 {
			return &queryError{".query", fmt.Sprintf("more than one statement (a ';' at offset %d): a metric is one query", t.pos)}
		}
		if t.kind == tokParam {
			return &queryError{".query", fmt.Sprintf("the query takes no parameters, but has %s at offset %d", t.text, t.pos)}
		}
	}
	first := toks[0]
	for first.kind == tokSymbol && first.text == "(" && len(toks) > 1 {
		toks = toks[1:]
		first = toks[0]
	}
	if first.kind != tokIdent || !readKeywords[first.text] {
		return &queryError{".query", fmt.Sprintf("must be a read-only query (SELECT, WITH, VALUES or TABLE), not one starting with %q", q[first.pos:min(len(q), first.pos+20)])}
	}
	folded := strings.ToLower(valueColumn) == valueColumn
	prev := ""
	for _, t := range toks {
		switch {
		case t.kind == tokIdent && folded && t.text == valueColumn,
			t.kind == tokQuoted && t.text == valueColumn,
			t.kind == tokSymbol && t.text == "*" && starAfter[prev]:
			return nil
		}
		prev = t.text
		if t.kind == tokString || t.kind == tokQuoted {
			prev = ""
		}
	}
	msg := fmt.Sprintf("the query has no column %q: name the value column (AS %s) or set valueColumn", valueColumn, valueColumn)
	if !folded {
		msg += fmt.Sprintf(`; PostgreSQL lower-cases unquoted names, write it "%s"`, valueColumn)
	}
	return &queryError{".valueColumn", msg}
}

// stripTerminator drops one trailing ';' (and what follows it: blanks,
// comments).
func stripTerminator(q string) string {
	toks, err := lex(q)
	if err != nil || len(toks) == 0 {
		return q
	}
	if last := toks[len(toks)-1]; last.kind == tokSymbol && last.text == ";" {
		return strings.TrimSpace(q[:last.pos])
	}
	return q
}
