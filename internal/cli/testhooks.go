package cli

// afterBatch is serve's tasks.Options.AfterBatch: nil, except in this package's tests,
// which hold a pipeline at a batch boundary with it to arrange what runs beside the
// pipeline instead of hoping the pipeline is slow enough.
var afterBatch func(handle string, batch int) error
