package convert

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// This file translates the formula of KEDA's scalingModifiers, an expression
// of expr-lang (github.com/expr-lang/expr, v1.17 in KEDA 2.21), into CEL
// for spec.formula. Only the subset whose meaning is the same in both is
// translated: numbers, trigger names, + - * /, comparisons, && || ! (and
// expr-lang's and/or/not), c ? a : b, and the calls max, min, abs, ceil,
// floor, round and float. The expression is parsed with expr-lang's
// precedences and associativity (its parser/operator table) into a tree,
// which is printed back in CEL with parentheses wherever CEL's precedences
// could read it otherwise; everything else is refused naming the construct.
//
// Why the same meaning: KEDA gives every trigger's value as a float64 and
// casts the result with float(); spec.formula reads every input as a double
// and integer literals as doubles. expr-lang's / always divides as floats,
// + - * of integer literals are exact in doubles at the sizes a formula
// holds, max/min/abs/ceil/floor/round are Go's math functions in both
// (math.round rounds half away from zero, as Go's math.Round), and chained
// comparisons (a < b < c) are expr-lang's a < b && b < c, written so.

// exprNode is a parsed formula.
type exprNode struct {
	kind  exprKind
	op    string     // unary or binary operator, in CEL's spelling; call name
	num   float64    // a number
	text  string     // a number's literal, an identifier
	args  []exprNode // operands, condition and branches, call arguments
	isInt bool       // a number written as an integer
}

type exprKind int

const (
	exprNumber exprKind = iota
	exprBool
	exprIdent
	exprUnary
	exprBinary
	exprCond
	exprCall
)

// unsupportedExpr is a construct the translation refuses.
type unsupportedExpr struct{ what string }

func (u *unsupportedExpr) Error() string { return u.what }

// invalidExpr is a formula expr-lang itself refuses (KEDA would too).
type invalidExpr struct{ what string }

func (e *invalidExpr) Error() string { return e.what }

type exprToken struct {
	kind byte // 'n' number, 'i' identifier, 'o' operator, '(' ')' ',' ; 0 end
	text string
	pos  int
}

// exprCalls maps the expr-lang functions translated to their CEL spelling
// ("" for float, whose argument is already a number).
var exprCalls = map[string]string{
	"max": "math.greatest", "min": "math.least", "abs": "math.abs",
	"ceil": "math.ceil", "floor": "math.floor", "round": "math.round", "float": "",
}

// exprOperatorNames name the expr-lang operators refused, for the reason.
var exprOperatorNames = map[string]string{
	"%": "the remainder operator %", "**": "the power operator **", "^": "the power operator ^",
	"??": "the nil-coalescing operator ??", "?.": "the optional chaining operator ?.", "?:": "the Elvis operator ?:",
	"|": "the pipe operator |", "..": "the range operator ..", "in": "the operator in", "matches": "the operator matches",
	"contains": "the operator contains", "startsWith": "the operator startsWith", "endsWith": "the operator endsWith",
	"let": "a let declaration", "if": "an if expression", "else": "an if expression", ";": "a sequence (;)",
	"#": "a predicate pointer #", ".": "member access (.)", "[": "an array or index ([])", "]": "an array or index ([])",
	"{": "a map or predicate ({})", "}": "a map or predicate ({})", "::": "the operator ::", "=": "an assignment (=)",
	"nil": "nil",
}

// lexFormula splits s into expr-lang tokens, refusing strings, comments
// and non-decimal numbers.
func lexFormula(s string) ([]exprToken, error) {
	var out []exprToken
	rs := []rune(s)
	for i := 0; i < len(rs); {
		r := rs[i]
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '"' || r == '\'' || r == '`':
			return nil, &unsupportedExpr{"a string"}
		case r >= '0' && r <= '9' || r == '.' && i+1 < len(rs) && rs[i+1] >= '0' && rs[i+1] <= '9':
			j := i
			for j < len(rs) && (rs[j] >= '0' && rs[j] <= '9' || rs[j] == '_') {
				j++
			}
			if j < len(rs) && rs[j] == '.' && !(j+1 < len(rs) && rs[j+1] == '.') {
				j++
				for j < len(rs) && (rs[j] >= '0' && rs[j] <= '9' || rs[j] == '_') {
					j++
				}
			}
			if j < len(rs) && (rs[j] == 'e' || rs[j] == 'E') {
				j++
				if j < len(rs) && (rs[j] == '+' || rs[j] == '-') {
					j++
				}
				for j < len(rs) && (rs[j] >= '0' && rs[j] <= '9' || rs[j] == '_') {
					j++
				}
			}
			if j < len(rs) && exprAlnum(rs[j]) {
				for j < len(rs) && exprAlnum(rs[j]) {
					j++
				}
				return nil, &unsupportedExpr{fmt.Sprintf("the number %q (only decimal numbers are translated)", string(rs[i:j]))}
			}
			out = append(out, exprToken{kind: 'n', text: string(rs[i:j]), pos: i})
			i = j
		case exprAlnum(r):
			j := i
			for j < len(rs) && exprAlnum(rs[j]) {
				j++
			}
			w := string(rs[i:j])
			switch w {
			case "and", "or", "not":
				out = append(out, exprToken{kind: 'o', text: w, pos: i})
			default:
				out = append(out, exprToken{kind: 'i', text: w, pos: i})
			}
			i = j
		case r == '(' || r == ')' || r == ',':
			out = append(out, exprToken{kind: byte(r), text: string(r), pos: i})
			i++
		default:
			two := ""
			if i+1 < len(rs) {
				two = string(rs[i : i+2])
			}
			switch two {
			case "//", "/*":
				return nil, &unsupportedExpr{"a comment"}
			case "&&", "||", "==", "!=", "<=", ">=", "**", "??", "?.", "..", "::":
				out = append(out, exprToken{kind: 'o', text: two, pos: i})
				i += 2
				continue
			}
			if strings.ContainsRune("+-*/<>!?:%^|;#.[]{}=&", r) {
				out = append(out, exprToken{kind: 'o', text: string(r), pos: i})
				i++
				continue
			}
			return nil, &invalidExpr{fmt.Sprintf("unrecognized character %q", r)}
		}
	}
	return append(out, exprToken{pos: len(rs)}), nil
}

// exprAlnum is expr-lang's identifier character.
func exprAlnum(r rune) bool {
	return r == '_' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// expr-lang's binary operators translated, with its precedences; && and ||
// stand for and and or too.
var exprBinaryPrec = map[string]int{
	"||": 10, "&&": 15,
	"==": 20, "!=": 20, "<": 20, ">": 20, "<=": 20, ">=": 20,
	"+": 30, "-": 30, "*": 60, "/": 60,
}

// expr-lang's unary precedences.
var exprUnaryPrec = map[string]int{"!": 50, "-": 90, "+": 90}

func exprSpelling(op string) string {
	switch op {
	case "and":
		return "&&"
	case "or":
		return "||"
	case "not":
		return "!"
	}
	return op
}

type formulaParser struct {
	toks []exprToken
	i    int
}

func (p *formulaParser) cur() exprToken { return p.toks[p.i] }

// parseFormula parses an expr-lang formula into a tree of the translated
// subset.
func parseFormula(s string) (exprNode, error) {
	toks, err := lexFormula(s)
	if err != nil {
		return exprNode{}, err
	}
	p := &formulaParser{toks: toks}
	n, err := p.expression(0)
	if err != nil {
		return exprNode{}, err
	}
	if t := p.cur(); t.kind != 0 {
		return exprNode{}, p.unexpected(t)
	}
	return n, nil
}

func (p *formulaParser) unexpected(t exprToken) error {
	if t.kind == 0 {
		return &invalidExpr{"unexpected end of the formula"}
	}
	if what, ok := exprOperatorNames[t.text]; ok {
		return &unsupportedExpr{what}
	}
	return &invalidExpr{fmt.Sprintf("unexpected %q at character %d", t.text, t.pos+1)}
}

// expression is expr-lang's parseExpression: a primary, then binary
// operators of precedence at least prec (left-associative), chained
// comparisons as their conjunction, and at precedence 0 a ternary.
func (p *formulaParser) expression(prec int) (exprNode, error) {
	if t := p.cur(); t.kind == 'i' && (t.text == "let" || t.text == "if") {
		return exprNode{}, &unsupportedExpr{exprOperatorNames[t.text]}
	}
	left, err := p.primary()
	if err != nil {
		return exprNode{}, err
	}
	for {
		t := p.cur()
		if t.kind != 'o' && !(t.kind == 'i' && exprOperatorNames[t.text] != "" && t.text != "nil") {
			break
		}
		op := exprSpelling(t.text)
		if t.text == "not" {
			// "not in", "not contains", ...
			return exprNode{}, &unsupportedExpr{"a negated operator (not ...)"}
		}
		bp, ok := exprBinaryPrec[op]
		if !ok {
			if op == "?" || op == ":" {
				break
			}
			return exprNode{}, p.unexpected(t)
		}
		if bp < prec {
			break
		}
		p.i++
		if op == "<" || op == ">" || op == "<=" || op == ">=" {
			left, err = p.comparison(left, op, bp)
			if err != nil {
				return exprNode{}, err
			}
			continue
		}
		right, err := p.expression(bp + 1)
		if err != nil {
			return exprNode{}, err
		}
		left = exprNode{kind: exprBinary, op: op, args: []exprNode{left, right}}
	}
	if prec == 0 {
		for p.cur().kind == 'o' && p.cur().text == "?" {
			p.i++
			if t := p.cur(); t.kind == 'o' && t.text == ":" {
				return exprNode{}, &unsupportedExpr{exprOperatorNames["?:"]}
			}
			a, err := p.expression(0)
			if err != nil {
				return exprNode{}, err
			}
			if t := p.cur(); t.kind != 'o' || t.text != ":" {
				return exprNode{}, p.unexpected(t)
			}
			p.i++
			b, err := p.expression(0)
			if err != nil {
				return exprNode{}, err
			}
			left = exprNode{kind: exprCond, args: []exprNode{left, a, b}}
		}
	}
	return left, nil
}

// comparison is expr-lang's parseComparison: a < b <= c is a < b && b <= c.
func (p *formulaParser) comparison(left exprNode, op string, prec int) (exprNode, error) {
	var root *exprNode
	for {
		right, err := p.expression(prec + 1)
		if err != nil {
			return exprNode{}, err
		}
		cmp := exprNode{kind: exprBinary, op: op, args: []exprNode{left, right}}
		if root == nil {
			root = &cmp
		} else {
			root = &exprNode{kind: exprBinary, op: "&&", args: []exprNode{*root, cmp}}
		}
		left = right
		t := p.cur()
		if t.kind != 'o' || (t.text != "<" && t.text != ">" && t.text != "<=" && t.text != ">=") {
			return *root, nil
		}
		op = t.text
		p.i++
	}
}

func (p *formulaParser) primary() (exprNode, error) {
	t := p.cur()
	if t.kind == 'o' {
		op := exprSpelling(t.text)
		if up, ok := exprUnaryPrec[op]; ok {
			p.i++
			x, err := p.expression(up)
			if err != nil {
				return exprNode{}, err
			}
			if op == "+" {
				// unary plus of a number is the number
				return x, p.postfix()
			}
			return exprNode{kind: exprUnary, op: op, args: []exprNode{x}}, p.postfix()
		}
	}
	switch t.kind {
	case '(':
		p.i++
		x, err := p.expression(0)
		if err != nil {
			return exprNode{}, err
		}
		if c := p.cur(); c.kind != ')' {
			return exprNode{}, p.unexpected(c)
		}
		p.i++
		return x, p.postfix()
	case 'n':
		p.i++
		n, err := exprNumberNode(t.text)
		if err != nil {
			return exprNode{}, err
		}
		return n, p.postfix()
	case 'i':
		p.i++
		switch t.text {
		case "true", "false":
			return exprNode{kind: exprBool, text: t.text}, p.postfix()
		case "nil", "let", "if", "else", "in", "matches", "contains", "startsWith", "endsWith":
			return exprNode{}, &unsupportedExpr{exprOperatorNames[t.text]}
		}
		if p.cur().kind != '(' {
			if t.text == "$env" {
				return exprNode{}, &unsupportedExpr{"the variable $env"}
			}
			return exprNode{kind: exprIdent, text: t.text}, p.postfix()
		}
		cel, ok := exprCalls[t.text]
		if !ok {
			return exprNode{}, &unsupportedExpr{fmt.Sprintf("the function %s()", t.text)}
		}
		p.i++
		var args []exprNode
		for p.cur().kind != ')' {
			a, err := p.expression(0)
			if err != nil {
				return exprNode{}, err
			}
			args = append(args, a)
			if p.cur().kind == ',' {
				p.i++
				continue
			}
			if p.cur().kind != ')' {
				return exprNode{}, p.unexpected(p.cur())
			}
		}
		p.i++
		switch {
		case len(args) == 0:
			return exprNode{}, &invalidExpr{fmt.Sprintf("%s() needs an argument", t.text)}
		case len(args) > 1 && t.text != "max" && t.text != "min":
			return exprNode{}, &invalidExpr{fmt.Sprintf("%s() takes one argument", t.text)}
		}
		if cel == "" {
			return args[0], p.postfix()
		}
		return exprNode{kind: exprCall, op: cel, args: args}, p.postfix()
	}
	return exprNode{}, p.unexpected(t)
}

// postfix refuses what expr-lang reads after a primary: member access,
// indexes and slices, optional chaining.
func (p *formulaParser) postfix() error {
	t := p.cur()
	if t.kind == 'o' && (t.text == "." || t.text == "[" || t.text == "?.") {
		return &unsupportedExpr{exprOperatorNames[t.text]}
	}
	if t.kind == '(' {
		return &unsupportedExpr{"a call of an expression"}
	}
	return nil
}

// exprNumberNode reads a decimal literal as expr-lang does: with a '.' or
// an exponent a float, else an int64 (underscores are separators).
func exprNumberNode(lit string) (exprNode, error) {
	v := strings.ReplaceAll(lit, "_", "")
	if strings.ContainsAny(v, ".eE") {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return exprNode{}, &invalidExpr{fmt.Sprintf("invalid float literal %q", lit)}
		}
		return exprNode{kind: exprNumber, num: f}, nil
	}
	i, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return exprNode{}, &invalidExpr{fmt.Sprintf("invalid integer literal %q", lit)}
	}
	return exprNode{kind: exprNumber, num: float64(i), isInt: true, text: strconv.FormatInt(i, 10)}, nil
}

// identifiers are the names the formula reads, in order of first use.
func (n exprNode) identifiers() []string {
	var out []string
	seen := map[string]bool{}
	var walk func(exprNode)
	walk = func(n exprNode) {
		if n.kind == exprIdent && !seen[n.text] {
			seen[n.text] = true
			out = append(out, n.text)
		}
		for _, a := range n.args {
			walk(a)
		}
	}
	walk(n)
	return out
}

// CEL's precedences, loosest first: ?:, ||, &&, relations, + -, * /,
// unary, primary (literals, names, calls, parentheses).
func celPrec(n exprNode) int {
	switch n.kind {
	case exprCond:
		return 1
	case exprBinary:
		switch n.op {
		case "||":
			return 2
		case "&&":
			return 3
		case "==", "!=", "<", ">", "<=", ">=":
			return 4
		case "+", "-":
			return 5
		default:
			return 6
		}
	case exprUnary:
		return 7
	}
	return 8
}

// cel prints n in CEL, names renamed by rename. A child is parenthesized
// unless it binds tighter than its parent, or is the left operand of a
// left-associative operator of the same precedence (relations, which CEL
// would read left to right too, are parenthesized all the same for the
// reader).
func (n exprNode) cel(rename map[string]string) string {
	var b strings.Builder
	n.write(&b, rename)
	return b.String()
}

func (n exprNode) write(b *strings.Builder, rename map[string]string) {
	child := func(c exprNode, bare bool) {
		if bare {
			c.write(b, rename)
			return
		}
		b.WriteByte('(')
		c.write(b, rename)
		b.WriteByte(')')
	}
	p := celPrec(n)
	switch n.kind {
	case exprNumber:
		if n.isInt {
			b.WriteString(n.text)
			return
		}
		s := strconv.FormatFloat(n.num, 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		b.WriteString(s)
	case exprBool:
		b.WriteString(n.text)
	case exprIdent:
		b.WriteString(rename[n.text])
	case exprUnary:
		b.WriteString(n.op)
		child(n.args[0], celPrec(n.args[0]) > p)
	case exprBinary:
		l, r := n.args[0], n.args[1]
		relation := p == 4
		child(l, celPrec(l) > p || celPrec(l) == p && !relation)
		b.WriteString(" " + n.op + " ")
		child(r, celPrec(r) > p)
	case exprCond:
		child(n.args[0], celPrec(n.args[0]) > p)
		b.WriteString(" ? ")
		child(n.args[1], celPrec(n.args[1]) > p)
		b.WriteString(" : ")
		child(n.args[2], celPrec(n.args[2]) > p)
	case exprCall:
		b.WriteString(n.op + "(")
		for i, a := range n.args {
			if i > 0 {
				b.WriteString(", ")
			}
			a.write(b, rename)
		}
		b.WriteByte(')')
	}
}
