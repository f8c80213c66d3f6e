;; A component that only imports wasi:sockets/tcp@0.2.0: admission must reject it
;; before anything runs.
(component
  (import "wasi:sockets/tcp@0.2.0" (instance
    (export "probe" (func (result u64)))))
)
