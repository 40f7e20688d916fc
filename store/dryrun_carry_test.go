package store

// SetMaxDryCarry lowers the dry run's carry bound for a test; it returns the old value.
func SetMaxDryCarry(n int) int {
	old := maxDryCarry
	maxDryCarry = n
	return old
}
