"""fleet.core.i18n: messages with parameters, stored as {"id","params"} and rendered in the reader's language."""

import json

from django.utils import translation

from fleet.core.i18n import Join, Msg, as_json, placeholders, render, text

# Ids below are in the zh_Hans catalogue (fleet/locale); the parity test keeps them there.
LOST = "{gpu} is lost (fallen off the bus or not responding)"
PCIE = "{gpu}: PCIe link degraded ({problems})"


def test_str_is_the_english_template_formatted():
    msg = Msg("GPU {index}: NVLink errors in the last {minutes:.0f} min ({described})", index=3, minutes=14.6,
              described="link 2: 5 CRC")
    assert str(msg) == "GPU 3: NVLink errors in the last 15 min (link 2: 5 CRC)"
    assert text(msg) == str(msg)


def test_str_stays_english_whatever_the_active_language():
    with translation.override("zh-hans"):
        assert str(Msg(LOST, gpu="GPU 1")) == "GPU 1 is lost (fallen off the bus or not responding)"


def test_as_json_holds_id_and_params_and_survives_a_json_round_trip():
    msg = Msg(PCIE, gpu="GPU 0", problems=Join([Msg("width x{width} of x{width_max}", width=8, width_max=16)]))
    data = json.loads(json.dumps(msg.as_json()))
    assert data["id"] == PCIE
    assert data["params"]["gpu"] == "GPU 0"
    assert data["params"]["problems"]["items"][0] == {"id": "width x{width} of x{width_max}",
                                                      "params": {"width": 8, "width_max": 16}}
    assert render(data, "en") == "GPU 0: PCIe link degraded (width x8 of x16)"


def test_render_translates_into_the_requested_language():
    data = Msg(LOST, gpu="GPU 2").as_json()
    assert render(data, "zh-hans") == "GPU 2 已丢失（掉出总线或无响应）"
    assert render(data, "en") == "GPU 2 is lost (fallen off the bus or not responding)"


def test_render_uses_the_active_language_by_default():
    data = Msg(LOST, gpu="GPU 2").as_json()
    with translation.override("zh-hans"):
        assert render(data) == "GPU 2 已丢失（掉出总线或无响应）"
    assert render(data) == "GPU 2 is lost (fallen off the bus or not responding)"


def test_nested_messages_and_joins_render_in_the_same_language():
    data = Msg(PCIE, gpu="GPU 0", problems=Join([
        Msg("width x{width} of x{width_max}", width=8, width_max=16),
        Msg("Gen{gen} of Gen{gen_max} at {util:.0f} % utilisation", gen=3, gen_max=5, util=87.4)])).as_json()
    assert render(data, "zh-hans") == "GPU 0：PCIe 链路降级（位宽 x8（最大 x16）；Gen3（最大 Gen5），利用率 87 %）"
    assert render(data, "en") == "GPU 0: PCIe link degraded (width x8 of x16; Gen3 of Gen5 at 87 % utilisation)"


def test_a_join_with_a_message_separator_translates_it():
    join = Join([Msg("page retirement"), Msg("row remapping")], Msg(" and "))
    assert str(join) == "page retirement and row remapping"
    assert render(join, "zh-hans") == "页退役和行重映射"


def test_an_id_without_a_translation_renders_as_english():
    data = Msg("an id nobody translated: {n}", n=4).as_json()
    assert render(data, "zh-hans") == "an id nobody translated: 4"


def test_a_translation_whose_placeholders_do_not_format_falls_back_to_english(monkeypatch):
    monkeypatch.setattr(translation, "gettext", lambda template: "坏的翻译 {missing}")
    assert render(Msg(LOST, gpu="GPU 5").as_json(), "zh-hans") == \
        "GPU 5 is lost (fallen off the bus or not responding)"


def test_a_message_missing_a_parameter_renders_its_template_instead_of_raising():
    assert render({"id": LOST, "params": {}}, "zh-hans") == LOST


def test_known_text_is_looked_up_and_operator_text_passes_through():
    assert render(Msg.known("reboot the machine"), "zh-hans") == "重启机器"
    assert render(Msg.known("call Li on the night shift"), "zh-hans") == "call Li on the night shift"


def test_capitalised_upper_cases_the_english_only():
    msg = Msg.known("reboot the machine").capitalised()
    assert str(msg) == "Reboot the machine"
    assert render(msg.as_json(), "zh-hans") == "重启机器"


def test_render_falls_back_for_rows_without_a_message():
    assert render(None, "zh-hans", fallback="old English summary") == "old English summary"
    assert render({}, fallback="x") == "x"


def test_plain_strings_render_as_themselves():
    assert render("typed by an operator", "zh-hans") == "typed by an operator"


def test_as_json_of_text_and_messages():
    assert as_json(None) is None
    assert as_json("") is None
    assert as_json("reboot the machine") == {"id": "reboot the machine", "params": {}}
    assert as_json(Msg(LOST, gpu="GPU 1")) == {"id": LOST, "params": {"gpu": "GPU 1"}}
    joined = as_json(Join([Msg("page retirement")]))
    assert render(joined, "en") == "page retirement"


def test_non_json_params_are_stored_as_text():
    class Odd:
        def __str__(self):
            return "odd"

    assert Msg(LOST, gpu=Odd()).as_json()["params"]["gpu"] == "odd"


def test_placeholders():
    assert placeholders("{a} and {b:.1f} and {a}") == {"a", "b"}
    assert placeholders("no fields") == set()


def test_a_join_of_numbers_and_an_operator_text_with_braces_never_raise():
    assert render(Join([1, 2.5, "x"], ", "), "zh-hans") == "1、2.5、x"
    assert str(Join([1, 2])) == "1; 2"
    assert render(Msg.known("uses {0.__class__} and { braces"), "zh-hans") == "uses {0.__class__} and { braces"
