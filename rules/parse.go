package rules

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"dataservice/internal/clip"
)

// YAML short tags the parser looks at.
const (
	tagStr   = "!!str"
	tagNull  = "!!null"
	tagInt   = "!!int"
	tagFloat = "!!float"
	tagBool  = "!!bool"
)

var errAlias = errors.New("aliases are not allowed")

// errNotList is decodeYAML's answer for a document that is not a list.
var errNotList = errors.New("content is not a list of rules")

// Parse compiles content, YAML text that is a list of rules. Empty content,
// "[]" and "null" are a valid empty pipeline.
//
// Errors about a rule name its 1-based position, e.g.
// `rule 3: unknown rule "field_foo"` or
// `rule 2: field_copy takes 2 arguments, got 3`.
func Parse(content string) (*Pipeline, error) {
	return parse(content, true)
}

// parse is Parse; knownConds=false accepts gates on conditions the content does not
// set, for examples shown out of their pipeline.
func parse(content string, knownConds bool) (*Pipeline, error) {
	root, err := decodeYAML(content)
	if err != nil {
		return nil, err
	}
	p := &Pipeline{}
	if root == nil {
		return p, nil
	}
	if root.Style&yaml.TaggedStyle != 0 {
		return nil, tagError(root)
	}
	c := compiler{conds: make(map[string]int)}
	p.rules = make([]rule, 0, len(root.Content))
	var bad ListError // every bad rule, in list order
	for i, n := range root.Content {
		if err := noTags(n); err != nil {
			bad.add(i+1, fmt.Errorf("rule %d: %w", i+1, err))
			continue
		}
		r, err := c.compileRule(n)
		if err != nil {
			bad.add(i+1, fmt.Errorf("rule %d: %w", i+1, err))
			continue
		}
		r.pos = i + 1
		p.rules = append(p.rules, r)
	}
	// A gate naming a condition that no set_condition sets would be a constant: most
	// likely a typo, which would make a gated delete never (or, negated, always) run.
	// (A condition whose set_condition rule is itself bad counts as unknown too.)
	for i := range p.rules {
		r := &p.rules[i]
		if knownConds && r.gate >= 0 && !c.set[r.gate] {
			bad.add(r.pos, fmt.Errorf("rule %d: %s: unknown condition %s: no set_condition of the pipeline sets it",
				r.pos, r.task, clip.Quote(c.names[r.gate])))
		}
	}
	if len(bad.Rules) > 0 {
		return nil, &bad
	}
	p.nconds = len(c.conds)
	return p, nil
}

// ListError is the error of a rule list with bad rules: every one of them, the rules
// that do not compile in list order, then the gates naming a condition nobody sets
// (checked once every rule is read). Its message is the first one's, the one a
// caller that shows one message shows; Rules lists them all.
type ListError struct {
	Rules []BadRule
}

// BadRule is one bad rule of a list: its 1-based position and why ("rule 2: ...").
type BadRule struct {
	Pos int
	Err error
}

func (e *ListError) Error() string { return e.Rules[0].Err.Error() }

// Unwrap returns every bad rule's error, so errors.As finds a *RuleError in any.
func (e *ListError) Unwrap() []error {
	out := make([]error, len(e.Rules))
	for i, r := range e.Rules {
		out[i] = r.Err
	}
	return out
}

// Messages are the bad rules' messages, in list order.
func (e *ListError) Messages() []string {
	out := make([]string, len(e.Rules))
	for i, r := range e.Rules {
		out[i] = r.Err.Error()
	}
	return out
}

func (e *ListError) add(pos int, err error) { e.Rules = append(e.Rules, BadRule{Pos: pos, Err: err}) }

// noTags refuses an explicit YAML tag anywhere under n. An unquoted gate `!is_prod`
// is a tag, not the text "!is_prod": YAML drops it from the value, which would turn a
// negated gate into "always run", so a tag is never read as anything.
func noTags(n *yaml.Node) error {
	if n.Style&yaml.TaggedStyle != 0 {
		return tagError(n)
	}
	for _, c := range n.Content {
		if err := noTags(c); err != nil {
			return err
		}
	}
	return nil
}

// tagError names a tagged node's line and says how to write what was meant.
func tagError(n *yaml.Node) error {
	tag := n.Tag
	if name, ok := strings.CutPrefix(tag, "!"); ok && !strings.HasPrefix(name, "!") {
		// A flow list reads `[!c, a]` as the tag "!c," on the value "a".
		name = strings.TrimRight(name, ",")
		if len(name) > 64 {
			name = "NAME" // the message quotes it already
		}
		return fmt.Errorf("line %d: YAML tag %s is not allowed: quote the condition, e.g. '!%s'",
			n.Line, clip.Quote(tag), name)
	}
	return fmt.Errorf("line %d: YAML tag %s is not allowed: remove it (quote a value that must stay text)",
		n.Line, clip.Quote(tag))
}

// decodeYAML decodes content into the sequence node of its rules, or nil
// when the content is empty or null.
func decodeYAML(content string) (seq *yaml.Node, err error) {
	defer func() {
		// yaml.v3 turns its own failures into errors; this is a last line of
		// defence so that Parse never panics on hostile content.
		if r := recover(); r != nil {
			seq, err = nil, fmt.Errorf("invalid YAML: %v", r)
		}
	}()
	dec := yaml.NewDecoder(strings.NewReader(content))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	// Later documents are only tolerated when empty (a trailing "---").
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("invalid YAML: %w", err)
		}
		if !isEmptyDocument(&next) {
			return nil, errors.New("content must be a single YAML document")
		}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	switch {
	case isEmptyDocument(root):
		return nil, nil
	case root.Kind == yaml.AliasNode:
		return nil, errAlias
	case root.Kind == yaml.SequenceNode:
		return root, nil
	default:
		return nil, errNotList
	}
}

// isEmptyDocument reports whether doc holds nothing or null.
func isEmptyDocument(doc *yaml.Node) bool {
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return true
		}
		doc = doc.Content[0]
	}
	return doc.Kind == 0 || doc.Kind == yaml.ScalarNode && doc.ShortTag() == tagNull
}

// compiler holds the state shared by the rules of one Parse call.
type compiler struct {
	conds map[string]int // condition name -> index
	names []string       // index -> condition name
	set   []bool         // index -> some set_condition sets it
}

// condIndex returns the index of condition name, allocating one if needed.
func (c *compiler) condIndex(name string) int {
	i, ok := c.conds[name]
	if !ok {
		i = len(c.conds)
		c.conds[name] = i
		c.names = append(c.names, name)
		c.set = append(c.set, false)
	}
	return i
}

// spec describes a transformation rule.
type spec struct {
	min, max int  // number of arguments after COND; max < 0 is unlimited
	oldForm  bool // a list of exactly min items is the form without COND
	kind     ruleKind
	build    func(a *args) (action, error) // kindAction only
}

// compileRule compiles one rule node.
func (c *compiler) compileRule(n *yaml.Node) (rule, error) {
	r := rule{gate: -1, cond: -1}
	if n.Kind == yaml.AliasNode {
		return r, errAlias
	}
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 {
		return r, errors.New("rule is not a one-key mapping (expected e.g. `- field_lower: email`)")
	}
	key, val := n.Content[0], n.Content[1]
	if err := noAliases(n); err != nil {
		return r, err
	}
	if key.Kind != yaml.ScalarNode || key.ShortTag() != tagStr {
		return r, errors.New("rule name is not a string")
	}
	r.task = key.Value
	if r.task == "set_condition" {
		return r, c.compileSetCondition(&r, val)
	}
	sp, ok := specs[r.task]
	if !ok {
		return r, fmt.Errorf("unknown rule %s", clip.Quote(r.task))
	}
	cond, items, err := splitArgs(sp, val)
	if err != nil {
		return r, fmt.Errorf("%s: %w", r.task, err)
	}
	if cond != nil {
		name, negated, err := parseCond(cond)
		if err != nil {
			return r, fmt.Errorf("%s: %w", r.task, err)
		}
		if name != "" {
			r.gate, r.negated = c.condIndex(name), negated
		}
	}
	if err := checkArity(r.task, sp.min, sp.max, len(items)); err != nil {
		return r, err
	}
	r.kind = sp.kind
	if sp.kind != kindAction {
		return r, nil
	}
	a := &args{items: items}
	act, err := sp.build(a)
	if err != nil {
		return r, fmt.Errorf("%s: %w", r.task, err)
	}
	r.act, r.touchesClass, r.outs, r.shrinks = act, a.touchesClass, a.outs, a.shrinks
	return r, nil
}

// compileSetCondition compiles `set_condition: [NAME, CHECKER, ARGS...]`.
func (c *compiler) compileSetCondition(r *rule, val *yaml.Node) error {
	const usage = "set_condition needs a list [NAME, CHECKER, ARGS...]"
	if val.Kind != yaml.SequenceNode || len(val.Content) < 2 {
		return errors.New(usage)
	}
	name, chk := val.Content[0], val.Content[1]
	if name.Kind != yaml.ScalarNode || name.ShortTag() != tagStr || name.Value == "" {
		return errors.New("set_condition: the condition name must be a non-empty string")
	}
	if strings.HasPrefix(name.Value, "!") {
		return fmt.Errorf("set_condition: invalid condition name %s: it must not start with '!'", clip.Quote(name.Value))
	}
	if chk.Kind != yaml.ScalarNode || chk.ShortTag() != tagStr {
		return errors.New("set_condition: the checker name must be a string")
	}
	cs, ok := checkers[chk.Value]
	if !ok {
		return fmt.Errorf("set_condition: unknown checker %s", clip.Quote(chk.Value))
	}
	items := val.Content[2:]
	if err := checkArity("set_condition: "+chk.Value, cs.n, cs.n, len(items)); err != nil {
		return err
	}
	a := &args{items: items}
	fn, err := cs.build(a)
	if err != nil {
		return fmt.Errorf("set_condition: %s: %w", chk.Value, err)
	}
	r.kind, r.cond, r.check = kindCondition, c.condIndex(name.Value), fn
	c.set[r.cond] = true
	return nil
}

// checkArity checks that a rule has between lo and hi arguments (hi < 0:
// no upper bound).
func checkArity(what string, lo, hi, got int) error {
	switch {
	case lo == hi && got != lo:
		if lo == 0 {
			return fmt.Errorf("%s takes no arguments, got %d", what, got)
		}
		return fmt.Errorf("%s takes %d %s, got %d", what, lo, plural(lo, "argument"), got)
	case hi < 0 && got < lo:
		return fmt.Errorf("%s takes at least %d %s, got %d", what, lo, plural(lo, "argument"), got)
	case hi >= 0 && (got < lo || got > hi):
		if hi == lo+1 {
			return fmt.Errorf("%s takes %d or %d arguments, got %d", what, lo, hi, got)
		}
		return fmt.Errorf("%s takes %d to %d arguments, got %d", what, lo, hi, got)
	}
	return nil
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// splitArgs splits a rule's value into its COND node (nil when always run) and its
// arguments.
func splitArgs(sp spec, val *yaml.Node) (cond *yaml.Node, items []*yaml.Node, err error) {
	switch val.Kind {
	case yaml.ScalarNode:
		switch {
		case val.ShortTag() == tagNull:
			return nil, nil, nil // `- discard:` has no arguments
		case sp.max == 0:
			return val, nil, nil // `- discard: NAME` is gated by NAME
		default:
			return nil, []*yaml.Node{val}, nil // `- field_lower: email`
		}
	case yaml.SequenceNode:
		items = val.Content
		switch {
		case len(items) == 0:
			return nil, nil, nil
		case sp.oldForm && len(items) == sp.min && !looksLikeCond(items[0]):
			return nil, items, nil
		default:
			return items[0], items[1:], nil
		}
	default:
		return nil, nil, errors.New("arguments must be a list or a scalar")
	}
}

// looksLikeCond reports whether n can only be a COND, never a field name:
// the empty string or a string starting with '!'.
func looksLikeCond(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == tagStr &&
		(n.Value == "" || n.Value[0] == '!')
}

// parseCond reads a COND node: the empty string (or null) always runs, NAME
// and '!NAME' gate on condition NAME.
func parseCond(n *yaml.Node) (name string, negated bool, err error) {
	if n.Kind != yaml.ScalarNode {
		return "", false, errors.New("the condition must be a string")
	}
	switch n.ShortTag() {
	case tagNull:
		return "", false, nil
	case tagStr:
	default:
		return "", false, fmt.Errorf("the condition must be a string, got %s %s", n.ShortTag(), clip.Quote(n.Value))
	}
	s := n.Value
	if s == "" {
		return "", false, nil
	}
	if s[0] == '!' {
		name = s[1:]
		if name == "" || name[0] == '!' {
			return "", false, fmt.Errorf("invalid condition %s", clip.Quote(s))
		}
		return name, true, nil
	}
	return s, false, nil
}

// noAliases rejects alias nodes anywhere under n.
func noAliases(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode {
		return errAlias
	}
	for _, c := range n.Content {
		if err := noAliases(c); err != nil {
			return err
		}
	}
	return nil
}

// args reads the arguments of a rule (COND excluded).
type args struct {
	items        []*yaml.Node
	touchesClass bool // an argument named the classname field
	// outs are the fields the rule writes or removes, each once, and shrinks is set
	// for a rule that removes fields it does not name (field_keep): Apply bounds
	// the entry's size through them (see actBounded).
	outs    []string
	shrinks bool
	// seen indexes outs once it is long: a rule may name any number of fields, and
	// a scan per name would make parsing quadratic in them.
	seen map[string]bool
}

// out reads argument i as a field the rule writes or removes.
func (a *args) out(i int) (string, error) {
	s, err := a.name(i)
	if err != nil {
		return s, err
	}
	switch {
	case a.seen != nil:
		if a.seen[s] {
			return s, nil
		}
		a.seen[s] = true
	case slices.Contains(a.outs, s):
		return s, nil
	case len(a.outs) >= 16:
		a.seen = make(map[string]bool, 2*len(a.outs))
		for _, o := range a.outs {
			a.seen[o] = true
		}
		a.seen[s] = true
	}
	a.outs = append(a.outs, s)
	return s, nil
}

// outNames reads arguments from..end as fields the rule writes or removes.
func (a *args) outNames(from int) ([]string, error) {
	out := make([]string, 0, len(a.items)-from)
	for i := from; i < len(a.items); i++ {
		s, err := a.out(i)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (a *args) len() int { return len(a.items) }

// name reads argument i as a field name: a non-empty string.
func (a *args) name(i int) (string, error) {
	n := a.items[i]
	if n.Kind != yaml.ScalarNode || n.ShortTag() != tagStr || n.Value == "" {
		return "", fmt.Errorf("argument %d: %s is not a field name (a non-empty string)", i+1, describe(n))
	}
	if n.Value == classnameKey {
		a.touchesClass = true
	}
	return n.Value, nil
}

// names reads arguments from..end as field names.
func (a *args) names(from int) ([]string, error) {
	out := make([]string, 0, len(a.items)-from)
	for i := from; i < len(a.items); i++ {
		s, err := a.name(i)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// text reads argument i as text: the source text of any scalar, "" for null.
func (a *args) text(i int) (string, error) {
	n := a.items[i]
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("argument %d: %s is not a scalar", i+1, describe(n))
	}
	if n.ShortTag() == tagNull {
		return "", nil
	}
	return n.Value, nil
}

// value reads argument i as a value: !!int is int64, !!float float64, !!bool bool
// when written in their canonical form (else the text as written), !!null nil,
// anything else its text; a list of scalars is a multi-valued []any.
func (a *args) value(i int) (any, error) {
	n := a.items[i]
	if n.Kind == yaml.SequenceNode {
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("argument %d: a list value may only hold scalars", i+1)
			}
			out = append(out, scalarValue(c))
		}
		return out, nil
	}
	if n.Kind != yaml.ScalarNode {
		return nil, fmt.Errorf("argument %d: %s is not a value", i+1, describe(n))
	}
	return scalarValue(n), nil
}

// scalarValue is the value of a scalar node: the typed value when the node's text
// is that value's canonical text (5, 1.5, true), else the text as written (1e3,
// 0o17, 1.50, True), so a string field gets exactly what the pipeline says and typed
// fields parse the text (as the loader does with load files).
func scalarValue(n *yaml.Node) any {
	v := typedScalar(n)
	if v != nil && textOf(v) != n.Value {
		return n.Value
	}
	return v
}

// typedScalar is the typed value YAML resolves a scalar node to.
func typedScalar(n *yaml.Node) any {
	switch n.ShortTag() {
	case tagNull:
		return nil
	case tagInt:
		var v int64
		if n.Decode(&v) == nil {
			return v
		}
	case tagFloat:
		var v float64
		if n.Decode(&v) == nil {
			return v
		}
	case tagBool:
		var v bool
		if n.Decode(&v) == nil {
			return v
		}
	}
	return n.Value
}

// describe names a node for error messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		return fmt.Sprintf("%s %s", n.ShortTag(), clip.Quote(n.Value))
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	default:
		return "a node"
	}
}
