;; A component that only imports wasi:clocks/wall-clock@0.2.0: admission must reject it
;; before anything runs.
(component
  (import "wasi:clocks/wall-clock@0.2.0" (instance
    (export "probe" (func (result u64)))))
)
