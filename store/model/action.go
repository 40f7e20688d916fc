package model

// Action is what an entry asks of its instance (its `_action`), and the kind of
// write a permission check distinguishes (ActionCreate, ActionUpdate, ActionDelete).
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
