;; A transform built before side inputs existed: it exports only
;; idem:transform/transform@0.2.0 (no side-inputs). `open` takes every
;; column (its return area, at address 0, is all zero: `ok(none)`), `push`
;; returns its input stream as its output (`ok` and the list's pointer and
;; length in the return area), `finish` nothing (an empty list). It runs
;; as before; a run that gives it a side input is refused, naming the
;; export it lacks.
(component
  (core module $Main
    (memory (export "memory") 1)
    (global $next (mut i32) (i32.const 1024))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $p i32)
      (local.set $p
        (i32.and
          (i32.add (global.get $next) (i32.sub (local.get 2) (i32.const 1)))
          (i32.sub (i32.const 0) (local.get 2))))
      (global.set $next (i32.add (local.get $p) (local.get 3)))
      (local.get $p))
    (func (export "open")
      (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
      (i32.const 0))
    (func (export "push") (param $ptr i32) (param $len i32) (result i32)
      (i32.store (i32.const 0) (i32.const 0))
      (i32.store (i32.const 4) (local.get $ptr))
      (i32.store (i32.const 8) (local.get $len))
      (i32.const 0))
    (func (export "finish") (result i32)
      (i32.store (i32.const 0) (i32.const 0))
      (i32.store (i32.const 4) (i32.const 0))
      (i32.store (i32.const 8) (i32.const 0))
      (i32.const 0)))
  (core instance $main (instantiate $Main))
  (type $context (record
    (field "slice-id" string)
    (field "logical-date" (option string))
    (field "params" string)
    (field "input-schema" (list u8))
    (field "batch-rows" u32)))
  (func $open (param "ctx" $context) (result (result (option (list string)) (error string)))
    (canon lift (core func $main "open")
      (memory (core memory $main "memory")) (realloc (core func $main "realloc"))))
  (func $push (param "batch" (list u8)) (result (result (list u8) (error string)))
    (canon lift (core func $main "push")
      (memory (core memory $main "memory")) (realloc (core func $main "realloc"))))
  (func $finish (result (result (list u8) (error string)))
    (canon lift (core func $main "finish") (memory (core memory $main "memory"))))
  (instance $transform
    (export "context" (type $context))
    (export "open" (func $open))
    (export "push" (func $push))
    (export "finish" (func $finish)))
  (export "idem:transform/transform@0.2.0" (instance $transform)))
