"""The `search_docs` and `read_doc` agent tools over the shipped corpus."""

from __future__ import annotations

import pytest

from avo.agent.tools import docs as docs_tools
from avo.agent.tools.base import TOOL_MODULES, ToolError


def test_agent_tools_search_and_read(tmp_path, monkeypatch):
    monkeypatch.setenv("AVO_CACHE_DIR", str(tmp_path))
    assert "avo.agent.tools.docs" in TOOL_MODULES
    tools = {tool.name: tool for tool in docs_tools.tools()}
    assert set(tools) == {"search_docs", "read_doc"}
    schema = tools["search_docs"].spec().input_schema
    assert schema["required"] == ["query"] and schema["properties"]["k"]["default"] == 5
    assert tools["read_doc"].spec().input_schema["required"] == ["id"]

    args = tools["search_docs"].args(query="tensor memory allocation on Blackwell", k=3)
    text, data = tools["search_docs"].fn(None, args)
    assert len(data["hits"]) == 3 and data["hits"][0]["id"] == "blackwell#tensor-memory-tmem"
    assert "blackwell#tensor-memory-tmem" in text and {"id", "title", "snippet", "score"} <= set(data["hits"][0])

    text, data = tools["read_doc"].fn(None, tools["read_doc"].args(id="blackwell#tensor-memory-tmem"))
    assert "tcgen05.alloc" in text and data["ids"] == ["blackwell#tensor-memory-tmem"]
    with pytest.raises(ToolError, match="unknown docs id"):
        tools["read_doc"].fn(None, tools["read_doc"].args(id="no-such-section"))
