"""Declared params (a Transform's ``params``): the checker, and the glue
(Runner, native.run) calling it before ``open``, with the messages the Rust
and JavaScript SDKs give."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import idem_guest as ig  # noqa: E402
from idem_guest import ipc, native  # noqa: E402
from idem_guest._runtime import Runner  # noqa: E402
from idem_guest.params import check_params, distance  # noqa: E402

DECLARED = [
    ig.Param("min_amount", float, default=0.0),
    ig.Param("key", str, default="event_id"),
    {"name": "limit", "type": "integer"},
    ig.Param("strict", bool, default=False),
]


class Checker(unittest.TestCase):
    def refused(self, params, pattern, declared=DECLARED):
        with self.assertRaisesRegex(ig.IdemError, pattern):
            check_params(declared, params)

    def test_unknown_param_is_refused_with_a_suggestion_and_the_list(self):
        self.refused({"min_amont": 10},
                     r"^unknown parameter `min_amont` \(did you mean `min_amount`\?\): this "
                     r"transform takes `min_amount` \(number, default 0.0\), `key` \(string, "
                     r"default \"event_id\"\), `limit` \(integer\), `strict` \(boolean, default "
                     r"false\)$")
        # Nothing within two edits: no suggestion; the least unknown key is named.
        self.refused({"zz": 1, "gap_minutes": 30},
                     r"^unknown parameter `gap_minutes`: this transform takes")
        self.refused({"x": 1}, r"this transform takes no parameters$", declared=[])

    def test_ill_typed_param_is_refused_naming_it_and_the_type(self):
        self.refused({"min_amount": "ten"},
                     r"^parameter `min_amount` must be a number, got \"ten\" \(a string\)$")
        self.refused({"min_amount": True}, r"`min_amount` must be a number, got true \(a boolean\)")
        self.refused({"key": 7}, r"`key` must be a string, got 7 \(a number\)")
        self.refused({"strict": "yes"}, r"`strict` must be a boolean")
        self.refused({"limit": 1.5}, r"^parameter `limit` must be an integer, got 1.5 "
                                     r"\(a number with a fraction\)$")
        self.refused({"limit": True}, r"`limit` must be an integer")
        self.refused(60, r"^params must be a JSON object, got 60$")
        self.refused([1], r"params must be a JSON object, got \[1\]")

    def test_integers_have_no_fraction(self):
        self.assertEqual(check_params(DECLARED, {"limit": 3})["limit"], 3)
        got = check_params(DECLARED, {"limit": 3.0})["limit"]
        self.assertEqual((got, type(got)), (3, int))

    def test_defaults_are_filled_and_given_values_kept(self):
        given = {"key": "id", "limit": 3}
        self.assertEqual(check_params(DECLARED, given),
                         {"key": "id", "limit": 3, "min_amount": 0.0, "strict": False})
        self.assertEqual(given, {"key": "id", "limit": 3}, "the given dict is not changed")
        self.assertEqual(check_params(DECLARED, {"min_amount": None})["min_amount"], 0.0)
        self.assertEqual(check_params(DECLARED, None)["key"], "event_id")

    def test_required_param_must_be_given(self):
        decl = [ig.Param("max_total", float, required=True, doc="upper bound")]
        self.refused({}, r"^missing required parameter `max_total` \(number, required\)$", decl)
        self.refused({"max_total": None}, r"missing required parameter", decl)
        self.assertEqual(check_params(decl, {"max_total": 5}), {"max_total": 5})

    def test_bad_declaration_is_named(self):
        self.refused({}, r"`a` is declared twice", [ig.Param("a", float), ig.Param("a", str)])
        self.refused({}, r"`n` has type \"list\"", [{"name": "n", "type": "list"}])
        self.refused({}, r"the default of parameter `n` must be an integer",
                     [ig.Param("n", int, default=0.5)])
        self.refused({}, r"params must be a list", ig.Param("n", int))

    def test_edit_distance(self):
        self.assertEqual(distance("min_amont", "min_amount"), 1)
        self.assertEqual(distance("gap_minute", "gap_minutes"), 1)
        self.assertEqual(distance("kye", "key"), 2)
        self.assertEqual(distance("", "abc"), 3)
        self.assertEqual(distance("x" * 10000, "key"), 3)


SCHEMA = ig.Schema([ig.Field("id", ig.float64, False)])


class Declared(ig.Transform):
    params = [ig.Param("min", int, default=2), ig.Param("tag", str, required=True)]

    def open(self, ctx):
        self.min = ctx.params["min"]

    def push(self, b):
        return b.filter(ig.compute.ge(b.column("id"), float(self.min)))


class Glue(unittest.TestCase):
    def ids(self, params):
        batch = ig.Batch.from_pydict({"id": [1.0, 2.0, 3.0]}, SCHEMA)
        out = native.run(Declared, ig.Context("s", None, params, SCHEMA, 8), [batch])
        return [v for o in out for v in o.column("id").to_pylist()]

    def test_native_run_checks_before_open(self):
        self.assertEqual(self.ids({"tag": "t"}), [2.0, 3.0])
        self.assertEqual(self.ids({"tag": "t", "min": 3.0}), [3.0])
        with self.assertRaisesRegex(ig.IdemError, r"unknown parameter `mni` \(did you mean `min`\?\)"):
            self.ids({"tag": "t", "mni": 3})
        with self.assertRaisesRegex(ig.IdemError, r"missing required parameter `tag`"):
            self.ids({})

    def test_runner_checks_before_open(self):
        r = Runner(Declared)
        with self.assertRaisesRegex(ig.IdemError, r"`min` must be an integer, got 2.5"):
            r.open("s", None, '{"tag": "t", "min": 2.5}', ipc.write_schema(SCHEMA), 8)
        self.assertIsNone(r.transform, "open was not called")
        r.open("s", None, '{"tag": "t"}', ipc.write_schema(SCHEMA), 8)
        self.assertEqual(r.transform.min, 2)

    def test_undeclared_transforms_take_anything(self):
        class Any(ig.Transform):
            def push(self, b):
                return b
        batch = ig.Batch.from_pydict({"id": [1.0]}, SCHEMA)
        out = native.run(Any, ig.Context("s", None, {"whatever": 1}, SCHEMA, 8), [batch])
        self.assertEqual(len(out), 1)


if __name__ == "__main__":
    unittest.main()
