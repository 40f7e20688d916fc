// Package rules implements the rule language of pipelines.
//
// A pipeline's content is YAML text that is directly a list of rules, for
// example:
//
//	# content of a pipeline
//	- field_lower: email
//	- set_condition: [is_admin, field_match, email, '@admin\.example$']
//	- field_set: [is_admin, role, admin]
//	- field_set: ['!is_admin', role, user]
//	- field_copy: [email, contact]
//	- discard: is_test
//
// Each rule is a one-key mapping TASK: [COND, ARGS...]. COND gates the rule:
// the empty string always runs it, NAME runs it when condition NAME is true
// and '!NAME' when it is false. An unquoted !NAME, which YAML reads as a tag,
// is accepted too. Conditions belong to one entry: they all start false in
// every Apply call and are written by set_condition: [NAME, CHECKER, ARGS...]
// rules, which are always run. The checkers are field_match, eq, ne, lt, le,
// gt, ge, exists, empty, is_true and is_false.
//
// Forms without the COND slot are accepted as if COND were empty: a scalar
// value is one argument (field_lower: email) and field_copy, field_rename and
// field_regexp_sub accept a list one item shorter than the full form
// (field_copy: [src, dst]). For the rules without arguments (field_noop,
// discard) a scalar value is the COND: discard: is_test is the same gate as
// discard: [is_test].
//
// Values keep the text the content gives them unless it is the canonical text
// of the number or boolean YAML reads: the first rule below sets the text
// "1e3", the second the integer 5.
//
//	# the text "1e3", then the integer 5
//	- field_set: ["", serial, 1e3]
//	- field_set: ["", n, 5]
//
// field_upper and field_lower use full Unicode case mapping (Straße becomes
// STRASSE). field_add, the reference application's 3.15 rule, sets each field
// named to the empty string. field_keep always keeps the identity keys and the
// keys starting with "_".
//
// Parse compiles content once, regular expressions and date expressions
// included, and reports every malformed rule with its 1-based position. The
// resulting Pipeline is immutable: Apply may be called concurrently from
// several goroutines, each with its own Entry.
package rules
