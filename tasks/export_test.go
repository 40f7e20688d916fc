package tasks

// QueueTable is the queue's door to its table, for the benchmark floors of
// tasks_test that run the queue's own statements.
var QueueTable = table
