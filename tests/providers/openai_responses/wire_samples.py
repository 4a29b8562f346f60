# ruff: noqa: E501
"""Recorded Responses API streams (from ``wire/openai-responses.md``): a reasoning model's
tool call with a reasoning summary, and a plain text answer."""

TOOL_CALL_STREAM = (
    "event: response.created\n"
    'data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_7c1","object":"response","created_at":1767225600,"status":"in_progress","model":"gpt-5.4-2026-03-05","output":[],"usage":null,"store":false}}\n'
    "\n"
    "event: response.in_progress\n"
    'data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_7c1","object":"response","created_at":1767225600,"status":"in_progress","model":"gpt-5.4-2026-03-05","output":[],"usage":null,"store":false}}\n'
    "\n"
    "event: response.output_item.added\n"
    'data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_7c2","type":"reasoning","summary":[]}}\n'
    "\n"
    "event: response.reasoning_summary_part.added\n"
    'data: {"type":"response.reasoning_summary_part.added","sequence_number":3,"item_id":"rs_7c2","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}\n'
    "\n"
    "event: response.reasoning_summary_text.delta\n"
    'data: {"type":"response.reasoning_summary_text.delta","sequence_number":4,"item_id":"rs_7c2","output_index":0,"summary_index":0,"delta":"Need live weather; "}\n'
    "\n"
    "event: response.reasoning_summary_text.delta\n"
    'data: {"type":"response.reasoning_summary_text.delta","sequence_number":5,"item_id":"rs_7c2","output_index":0,"summary_index":0,"delta":"calling get_weather."}\n'
    "\n"
    "event: response.reasoning_summary_text.done\n"
    'data: {"type":"response.reasoning_summary_text.done","sequence_number":6,"item_id":"rs_7c2","output_index":0,"summary_index":0,"text":"Need live weather; calling get_weather."}\n'
    "\n"
    "event: response.reasoning_summary_part.done\n"
    'data: {"type":"response.reasoning_summary_part.done","sequence_number":7,"item_id":"rs_7c2","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":"Need live weather; calling get_weather."}}\n'
    "\n"
    "event: response.output_item.done\n"
    'data: {"type":"response.output_item.done","sequence_number":8,"output_index":0,"item":{"id":"rs_7c2","type":"reasoning","summary":[{"type":"summary_text","text":"Need live weather; calling get_weather."}],"encrypted_content":"gAAAAABpX…"}}\n'
    "\n"
    "event: response.output_item.added\n"
    'data: {"type":"response.output_item.added","sequence_number":9,"output_index":1,"item":{"id":"fc_7c3","type":"function_call","status":"in_progress","arguments":"","call_id":"call_Q7fz2","name":"get_weather"}}\n'
    "\n"
    "event: response.function_call_arguments.delta\n"
    'data: {"type":"response.function_call_arguments.delta","sequence_number":10,"item_id":"fc_7c3","output_index":1,"delta":"{\\"city\\":\\""}\n'
    "\n"
    "event: response.function_call_arguments.delta\n"
    'data: {"type":"response.function_call_arguments.delta","sequence_number":11,"item_id":"fc_7c3","output_index":1,"delta":"Paris\\"}"}\n'
    "\n"
    "event: response.function_call_arguments.done\n"
    'data: {"type":"response.function_call_arguments.done","sequence_number":12,"item_id":"fc_7c3","output_index":1,"arguments":"{\\"city\\":\\"Paris\\"}"}\n'
    "\n"
    "event: response.output_item.done\n"
    'data: {"type":"response.output_item.done","sequence_number":13,"output_index":1,"item":{"id":"fc_7c3","type":"function_call","status":"completed","arguments":"{\\"city\\":\\"Paris\\"}","call_id":"call_Q7fz2","name":"get_weather"}}\n'
    "\n"
    "event: response.completed\n"
    'data: {"type":"response.completed","sequence_number":14,"response":{"id":"resp_7c1","object":"response","status":"completed","model":"gpt-5.4-2026-03-05","incomplete_details":null,"error":null,"output":[{"id":"rs_7c2","type":"reasoning","summary":[{"type":"summary_text","text":"Need live weather; calling get_weather."}],"encrypted_content":"gAAAAABpX…"},{"id":"fc_7c3","type":"function_call","status":"completed","arguments":"{\\"city\\":\\"Paris\\"}","call_id":"call_Q7fz2","name":"get_weather"}],"usage":{"input_tokens":88,"input_tokens_details":{"cached_tokens":0},"output_tokens":151,"output_tokens_details":{"reasoning_tokens":128},"total_tokens":239}}}\n'
    "\n"
)

TEXT_STREAM = (
    "event: response.created\n"
    'data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-4.1-2025-04-14","output":[],"usage":null}}\n'
    "\n"
    "event: response.output_item.added\n"
    'data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}\n'
    "\n"
    "event: response.content_part.added\n"
    'data: {"type":"response.content_part.added","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}\n'
    "\n"
    "event: response.output_text.delta\n"
    'data: {"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hel","logprobs":[],"obfuscation":"x1"}\n'
    "\n"
    "event: response.output_text.delta\n"
    'data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"lo","logprobs":[]}\n'
    "\n"
    "event: response.output_text.done\n"
    'data: {"type":"response.output_text.done","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"text":"Hello","logprobs":[]}\n'
    "\n"
    "event: response.output_item.done\n"
    'data: {"type":"response.output_item.done","sequence_number":6,"output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","text":"Hello","annotations":[]}],"role":"assistant"}}\n'
    "\n"
    "event: response.completed\n"
    'data: {"type":"response.completed","sequence_number":7,"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-4.1-2025-04-14","output":[{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","text":"Hello","annotations":[]}],"role":"assistant"}],"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":7}}}\n'
    "\n"
)
