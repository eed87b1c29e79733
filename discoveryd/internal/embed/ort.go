//go:build cgo

package embed

import (
	"fmt"
	"os"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// The runtime's environment is one per process, and so is its library.
var (
	envOnce sync.Once
	envLib  string
	errEnv  error
)

// initRuntime loads the library at lib, once per process: a second
// library, or a second try after a failure, is refused.
func initRuntime(lib string) error {
	if _, err := os.Stat(lib); err != nil {
		return fmt.Errorf("%w: %w", ErrNoRuntime, err)
	}
	envOnce.Do(func() {
		envLib = lib
		ort.SetSharedLibraryPath(lib)
		if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
			errEnv = fmt.Errorf("%w: %w", ErrNoRuntime, err)
		}
	})
	if errEnv == nil && lib != envLib {
		return fmt.Errorf("%w: the process already uses %s", ErrNoRuntime, envLib)
	}
	return errEnv
}

// ortRunner is a session of the model.
type ortRunner struct {
	sess      *ort.DynamicAdvancedSession
	typeInput bool // the graph takes token_type_ids
}

// openRunner loads the library and the model, on one thread: a query is
// a few tokens, and the machine is shared with the sandboxes.
func openRunner(lib, model string) (runner, error) {
	if _, err := os.Stat(model); err != nil {
		return nil, err
	}
	if err := initRuntime(lib); err != nil {
		return nil, err
	}
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	defer func() { _ = opts.Destroy() }()
	if err := opts.SetIntraOpNumThreads(1); err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	if err := opts.SetInterOpNumThreads(1); err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	inputs, _, err := ort.GetInputOutputInfoWithOptions(model, opts)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", model, err)
	}
	r := &ortRunner{}
	names := []string{"input_ids", "attention_mask"}
	for _, in := range inputs {
		if in.Name == "token_type_ids" {
			r.typeInput = true
			names = append(names, in.Name)
		}
	}
	r.sess, err = ort.NewDynamicAdvancedSession(model, names, []string{"last_hidden_state"}, opts)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", model, err)
	}
	return r, nil
}

func (r *ortRunner) run(ids, mask []int64, rows, cols int) ([]float32, error) {
	shape := ort.NewShape(int64(rows), int64(cols))
	var values []ort.Value
	defer func() {
		for _, v := range values {
			if v != nil {
				_ = v.Destroy()
			}
		}
	}()
	inputs := [][]int64{ids, mask}
	if r.typeInput {
		inputs = append(inputs, make([]int64, len(ids)))
	}
	for _, data := range inputs {
		t, err := ort.NewTensor(shape, data)
		if err != nil {
			return nil, fmt.Errorf("input tensor: %w", err)
		}
		values = append(values, t)
	}
	outputs := []ort.Value{nil}
	if err := r.sess.Run(values, outputs); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	values = append(values, outputs[0])
	t, ok := outputs[0].(*ort.Tensor[float32])
	if !ok {
		return nil, fmt.Errorf("run: output is %T, not float32 tensor", outputs[0])
	}
	return append([]float32(nil), t.GetData()...), nil
}

func (r *ortRunner) close() error { return r.sess.Destroy() }
