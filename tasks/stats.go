package tasks

import "context"

// Statuses lists every task status, in lifecycle order.
var Statuses = []string{StatusQueued, StatusRunning, StatusSucceeded, StatusFailed, StatusCancelled}

// CountByStatus returns how many tasks are in each status (every status present, 0 when none).
func (r *Runner) CountByStatus(ctx context.Context) (map[string]int64, error) {
	out := make(map[string]int64, len(Statuses))
	for _, st := range Statuses {
		out[st] = 0
	}
	rows, err := table.Read(ctx, r.db, "SELECT status, COUNT(*) FROM tasks GROUP BY status")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[st] = n
	}
	return out, rows.Err()
}
