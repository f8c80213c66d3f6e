;; A transform component whose memory declares a maximum of 2 pages and
;; whose `open` grows it by 8: a failed grow must stop the run (a trap),
;; never answer -1 and let the guest go on (a failed grow can be the host's
;; state, which must not change an output). `push` and `finish` are never
;; reached.
(component
  (core module $Main
    (memory (export "memory") 1 2)
    ;; A bump allocator for the arguments the host lowers into memory; the
    ;; return area lives at address 0 (all zero: `ok`).
    (global $next (mut i32) (i32.const 1024))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $p i32)
      (local.set $p
        (i32.and
          (i32.add (global.get $next) (i32.sub (local.get 2) (i32.const 1)))
          (i32.sub (i32.const 0) (local.get 2))))
      (global.set $next (i32.add (local.get $p) (local.get 3)))
      (local.get $p))
    ;; open(ctx) -> result<_, string>: grow by 8 pages, past the memory's
    ;; own maximum of 2; told -1, it would go on and return ok.
    (func (export "open")
      (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
      (drop (memory.grow (i32.const 8)))
      (i32.const 0))
    (func (export "push") (param i32 i32) (result i32) unreachable)
    (func (export "finish") (result i32) unreachable))
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
