package model

// Action is what an entry asks of its instance (its `_action`), and the kind of
// write a permission check distinguishes (ActionCreate, ActionUpdate, ActionDelete).
// The same words name the kind of change a revision row records.
type Action string

// Actions an entry may ask for.
const (
	ActionCreate  Action = "create"
	ActionUpdate  Action = "update"
	ActionInit    Action = "init"
	ActionDelete  Action = "delete"
	ActionEnable  Action = "enable"
	ActionDisable Action = "disable"
	ActionNoop    Action = "noop"
)

// ActionRename is the kind of change a rename writes to its revision row. It is a
// revision kind only: no entry may ask for it (its `_action` is refused as unknown);
// a rename goes through its own door.
const ActionRename Action = "rename"

// actionCreateOrUpdate is a spelling an entry or a schema field may use for
// ActionCreate (which creates or updates).
const actionCreateOrUpdate = "create_or_update"
