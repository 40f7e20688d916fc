package model

// MergePatch applies a JSON merge patch (RFC 7396) to target and returns the result;
// target is not modified. A null member of patch removes the member from the result,
// an object member is merged into the target's member when that is an object too, and
// any other member replaces the target's.
func MergePatch(target, patch map[string]any) map[string]any {
	out := make(map[string]any, len(target)+len(patch))
	for k, v := range target {
		out[k] = v
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(out, k)
		case map[string]any:
			tv, _ := out[k].(map[string]any)
			out[k] = MergePatch(tv, pv)
		default:
			out[k] = v
		}
	}
	return out
}
