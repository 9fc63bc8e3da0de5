"""Which expressions of a program are derived from ``data`` (static, conservative).

Forgery F1 of issue 9: ``pm.Bernoulli("x", logit_p=f(mu), observed=1)`` adds the term
``log sigmoid(f(mu))`` to the log-density: a ``pm.Potential`` in disguise. The strict
profile therefore requires every ``observed=`` value to be derived from the ``data``
argument of ``model``.

"Derived" is a *must* property: a name is derived only if **every** binding of it in
its scope is (``y = data["y"]; y = 3.0`` makes ``y`` not derived) and it depends on
``data`` through some chain of bindings (so helpers calling each other in a cycle are
not derived by themselves). An expression is derived if it reads a derived name; a
helper function counts as derived when its body reads one (``data`` from the enclosing
``model``, a closure); a helper's parameter is derived only if every call of the helper
passes a derived argument for it, written out (a default, ``*args``, a helper passed
around as a value or never called, and lambda parameters are not derived).

This is a syntactic rule: ``observed=0 * len(data) + 3.0`` reads ``data`` and passes; it
catches literals, constants, ``pm.Data`` of constants and values computed only from them.
It runs in time linear in the program's size (a counting worklist, not repeated sweeps),
because it runs in the API process on untrusted sources.
"""
from __future__ import annotations

import ast
from collections import defaultdict

_SCOPES = (ast.Module, ast.FunctionDef, ast.Lambda, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)


class DataFlow:
    """Answer ``derived(expr)`` for the expressions of one module."""

    def __init__(self, tree: ast.Module, data_params: dict[ast.FunctionDef, str]) -> None:
        self.scope_of: dict[ast.AST, ast.AST] = {}
        # (scope, name) -> binding sources; a source is an expression, a parameter
        # (function, index, name), a function definition, or None (never derived: imports,
        # except names)
        self.bindings: dict[tuple[ast.AST, str], list] = defaultdict(list)
        self.functions: dict[tuple[ast.AST, str], ast.FunctionDef] = {}
        self.calls: dict[ast.FunctionDef, list[ast.Call]] = defaultdict(list)
        self.escaped: set[ast.FunctionDef] = set()
        self.data_params = data_params
        self._assign_scopes(tree, tree)
        self._collect(tree)
        self._link_calls(tree)
        self.derived_names = self._solve()

    # -- scopes and bindings -----------------------------------------------------------
    def _assign_scopes(self, node: ast.AST, scope: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            self.scope_of[child] = scope
            inner = child if isinstance(child, _SCOPES) else scope
            self._assign_scopes(child, inner)
            if isinstance(child, (ast.FunctionDef, ast.Lambda)):
                # decorators and defaults are evaluated in the enclosing scope
                for part in (*getattr(child, "decorator_list", ()), *child.args.defaults,
                             *[d for d in child.args.kw_defaults if d is not None]):
                    for sub in ast.walk(part):
                        self.scope_of[sub] = scope

    def _assign_scopes_at(self, node: ast.AST, scope: ast.AST) -> None:
        self.scope_of[node] = scope
        for sub in ast.walk(node):
            self.scope_of.setdefault(sub, scope)

    def _bind_target(self, target: ast.AST, source) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.bindings[(self.scope_of[node], node.id)].append(source)

    def _collect(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self._bind_target(target, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                self._bind_target(node.target, node.value)
            elif isinstance(node, ast.AugAssign):
                self._bind_target(node.target, ast.BinOp(
                    left=ast.Name(node.target.id, ast.Load()) if isinstance(
                        node.target, ast.Name) else node.target, op=node.op, right=node.value))
                if isinstance(node.target, ast.Name):
                    self._fix_scopes(node)
            elif isinstance(node, (ast.For, ast.comprehension)):
                self._bind_target(node.target, node.iter)
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                self._bind_target(node.optional_vars, node.context_expr)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                scope = self.scope_of[node]
                for alias in node.names:
                    self.bindings[(scope, alias.asname or alias.name.split(".")[0])].append(None)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self.bindings[(self.scope_of[node], node.name)].append(None)
            elif isinstance(node, ast.FunctionDef):
                self.bindings[(self.scope_of[node], node.name)].append(("function", node))
                self.functions[(self.scope_of[node], node.name)] = node
                self._bind_params(node)
            elif isinstance(node, ast.Lambda):
                self._bind_params(node)

    def _fix_scopes(self, node: ast.AugAssign) -> None:
        # the synthetic BinOp above reads the target in the AugAssign's scope
        scope = self.scope_of[node]
        source = self.bindings[(scope, node.target.id)][-1]
        self._assign_scopes_at(source, scope)

    def _bind_params(self, func: ast.FunctionDef | ast.Lambda) -> None:
        a = func.args
        positional = [*a.posonlyargs, *a.args]
        for index, arg in enumerate(positional):
            self.bindings[(func, arg.arg)].append(("param", func, index, arg.arg))
        for arg in [*a.kwonlyargs, a.vararg, a.kwarg]:
            if arg is not None:
                self.bindings[(func, arg.arg)].append(("param", func, None, arg.arg))

    def _link_calls(self, tree: ast.Module) -> None:
        """Record each helper's call sites; a helper used as a value escapes."""
        callees = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                func = self._function(node.func)
                if func is not None:
                    self.calls[func].append(node)
                    callees.add(node.func)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) \
                    and node not in callees:
                func = self._function(node)
                if func is not None:
                    self.escaped.add(func)

    def _resolve(self, name: ast.Name) -> tuple[ast.AST, str] | None:
        scope = self.scope_of.get(name)
        while scope is not None:
            if (scope, name.id) in self.bindings:
                return scope, name.id
            scope = self.scope_of.get(scope)
        return None

    def _function(self, name: ast.Name) -> ast.FunctionDef | None:
        key = self._resolve(name)
        return self.functions.get(key) if key is not None else None

    # -- the fixpoint -------------------------------------------------------------------
    def _atoms(self, source) -> list:
        """A binding source as atoms, each True, False or the set of keys it reads (true
        when one of them is derived); the source is derived when all its atoms are."""
        if source is None:
            return [False]
        if isinstance(source, tuple) and source[0] == "function":
            # a helper's result is derived if its body reads derived names (closures)
            return [set().union(*(self._reads(statement) for statement in source[1].body))]
        if isinstance(source, tuple):
            _, func, index, name = source
            if isinstance(func, ast.FunctionDef) and self.data_params.get(func) == name:
                return [True]
            if isinstance(func, ast.Lambda) or func in self.escaped or not self.calls[func]:
                return [False]
            return [self._argument(call, index, name) for call in self.calls[func]]
        return [self._reads(source)]

    def _argument(self, call: ast.Call, index: int | None, name: str):
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
                k.arg is None for k in call.keywords):
            return False  # arguments cannot be matched to parameters
        if index is not None and index < len(call.args):
            return self._reads(call.args[index])
        for keyword in call.keywords:
            if keyword.arg == name:
                return self._reads(keyword.value)
        return False  # the default binds: evaluated when the helper was defined

    def _reads(self, node: ast.AST) -> set:
        keys = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                key = self._resolve(sub)
                if key is not None:
                    keys.add(key)
        return keys

    def _solve(self) -> dict:
        atoms = {key: [a for source in sources for a in self._atoms(source)]
                 for key, sources in self.bindings.items()}
        # 1. may-reach `data`: keys from which a chain of reads leads to a data parameter
        readers = defaultdict(set)
        for key, parts in atoms.items():
            for part in parts:
                if isinstance(part, set):
                    for read in part:
                        readers[read].add(key)
        reach = {key for key, parts in atoms.items() if True in parts}
        todo = list(reach)
        while todo:
            for reader in readers[todo.pop()]:
                if reader not in reach:
                    reach.add(reader)
                    todo.append(reader)
        # 2. must: drop keys with an atom that is false, until nothing changes; each atom
        #    counts its reads still derived, so every key and atom is handled once.
        derived = {key: key in reach for key in atoms}
        counts, watchers = {}, defaultdict(list)
        drop = [key for key in atoms if not derived[key]]
        for key, parts in atoms.items():
            for number, part in enumerate(parts):
                if part is False or (isinstance(part, set) and not part & reach):
                    drop.append(key)
                elif isinstance(part, set):
                    counts[(key, number)] = len(part & reach)
                    for read in part & reach:
                        watchers[read].append((key, number))
        while drop:
            key = drop.pop()
            derived[key] = False
            for watcher in watchers.pop(key, ()):
                counts[watcher] -= 1
                if counts[watcher] == 0:
                    drop.append(watcher[0])
        return derived

    def derived(self, expr: ast.AST) -> bool:
        """Whether ``expr`` reads a name derived from ``data``."""
        return any(self.derived_names.get(key, False) for key in self._reads(expr))
