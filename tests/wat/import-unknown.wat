;; A component that imports an interface the host does not know: rejected as
;; "unknown import" before anything runs.
(component
  (import "acme:spy/phone-home@1.0.0" (instance
    (export "probe" (func (result u64)))))
)
