"""GroupSearcher and grid packing: configs grouped by pack key, results fed back per config."""

from ray.tune.search import Searcher

from orthotune.search._grouping import GroupSearcher, group_points


class Recording(Searcher):
    """A searcher that suggests given configs in order and records what it is told."""

    def __init__(self, configs):
        super().__init__(metric="val_acc", mode="max")
        self.configs, self.told = list(configs), {}

    def suggest(self, trial_id):
        return self.configs.pop(0) if self.configs else Searcher.FINISHED

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.told[trial_id] = (result, error)


def key(config):
    return (config["depth"],)


def drain(searcher):
    packs = []
    while True:
        suggestion = searcher.suggest(f"t{len(packs)}")
        if suggestion in (None, Searcher.FINISHED):
            return packs, suggestion
        packs.append(suggestion["group"])


def test_packs_share_a_key_and_cover_every_config():
    configs = [{"depth": d, "i": i} for i, d in enumerate([2, 4, 2, 2, 4, 2, 8])]
    searcher = GroupSearcher(Recording(configs), group_size=2, samples=7, key=key, metric="val_acc", mode="max")
    packs, last = drain(searcher)
    assert last == Searcher.FINISHED
    assert all(len({c["depth"] for c in pack}) == 1 and len(pack) <= 2 for pack in packs)
    assert sorted(c["i"] for pack in packs for c in pack) == list(range(7))
    assert max(len(p) for p in packs) == 2


def test_samples_caps_the_configs_asked():
    configs = [{"depth": 2, "i": i} for i in range(10)]
    searcher = GroupSearcher(Recording(configs), group_size=3, samples=4, key=key, metric="val_acc", mode="max")
    packs, _ = drain(searcher)
    assert sum(len(p) for p in packs) == 4


def test_each_config_gets_its_own_objective_back():
    inner = Recording([{"depth": 2, "i": i} for i in range(3)])
    searcher = GroupSearcher(inner, group_size=3, samples=3, key=key, metric="val_acc", mode="max")
    pack = searcher.suggest("t0")["group"]
    assert len(pack) == 3
    searcher.on_trial_complete("t0", {"val_acc": 0.9, "member_val_acc": [0.5, 0.9, 0.7]})
    told = [inner.told[member] for member in sorted(inner.told)]
    assert [result["val_acc"] for result, _ in told] == [0.5, 0.9, 0.7]
    assert not any(error for _, error in told)


def test_an_errored_pack_reports_each_config_as_errored():
    inner = Recording([{"depth": 2, "i": i} for i in range(2)])
    searcher = GroupSearcher(inner, group_size=2, samples=2, key=key, metric="val_acc", mode="max")
    searcher.suggest("t0")
    searcher.on_trial_complete("t0", None, error=True)
    assert len(inner.told) == 2 and all(error for _, error in inner.told.values())


def test_grid_points_pack_by_key_in_order():
    points = [{"depth": d, "i": i} for i, d in enumerate([2, 4, 2, 2, 4])]
    packs = group_points(points, 2, key=key)
    assert [[c["i"] for c in p["group"]] for p in packs] == [[0, 2], [3], [1, 4]]


def test_point_searcher_gives_each_point_once_then_finishes():
    from orthotune.search._grouping import PointSearcher

    points = [{"group": [{"depth": 2}, {"depth": 2}]}, {"depth": 4}]
    searcher = PointSearcher(points, metric="val_acc", mode="max")
    assert [searcher.suggest("a"), searcher.suggest("b")] == points
    assert searcher.suggest("c") == Searcher.FINISHED
