;; A component that imports wasi:http/outgoing-handler@0.2.0: admission must
;; reject it before anything runs (its start function would call out).
(component
  (import "wasi:http/outgoing-handler@0.2.0" (instance
    (export "probe" (func (result u64)))))
)
