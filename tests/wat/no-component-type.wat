;; A core module without wit-bindgen's component-type section: it encodes
;; into a component with no exports, which must not pass as a transform.
(module
  (memory (export "memory") 1)
  (func (export "push") (param i32 i32) (result i32) i32.const 0))
