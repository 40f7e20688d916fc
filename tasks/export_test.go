package tasks

// QueueTable is the queue's door to its table, for the benchmark floors of
// tasks_test that run the queue's own statements.
var QueueTable = table

// SetBeforeRun makes s call f with a schedule's keyname after Tick read the schedules
// and before the schedule's due run is dealt with: a change made in f is one made
// while the tick runs.
func SetBeforeRun(s *Scheduler, f func(keyname string)) { s.beforeRun = f }
