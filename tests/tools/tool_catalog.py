"""A generated catalogue of 500 tool definitions (10 MCP-like servers of 40 tools and 100 local
tools) and paraphrased queries for them, for the tool search tests and the bench.

Seeded, so every run sees the same catalogue. The paraphrases follow the issue's rules:
synonyms (from a thesaurus written for this file, not the index's own table), word order, and
missing words.
"""

from __future__ import annotations

import random

from kova import ToolDefinition

SERVERS = {
    "github": ("GitHub", ["issue", "pull request", "branch", "release", "repository"]),
    "slack": ("Slack", ["message", "channel", "reaction", "reminder", "user group"]),
    "jira": ("Jira", ["ticket", "sprint", "epic", "worklog", "board"]),
    "calendar": ("Google Calendar", ["event", "calendar", "attendee", "reminder", "room"]),
    "drive": ("Google Drive", ["file", "folder", "permission", "comment", "revision"]),
    "postgres": ("PostgreSQL", ["table", "row", "index", "schema", "query plan"]),
    "stripe": ("Stripe", ["invoice", "customer", "subscription", "refund", "payment"]),
    "crm": ("Salesforce", ["lead", "contact", "opportunity", "account", "campaign"]),
    "k8s": ("Kubernetes", ["pod", "deployment", "service", "namespace", "secret"]),
    "mail": ("Gmail", ["email", "draft", "label", "thread", "attachment"]),
}
ACTIONS = [
    ("create", "Create a new {object} in {product}."),
    ("list", "List every {object} in {product}, newest first."),
    ("get", "Get the details of one {object} from {product} by its id."),
    ("update", "Update the fields of an existing {object} in {product}."),
    ("delete", "Delete a {object} from {product} permanently."),
    ("search", "Search {product} for a {object} matching a text query."),
    ("archive", "Archive an old {object} in {product} so it is hidden."),
    ("export", "Export a {object} from {product} as a CSV file."),
]
LOCAL = [
    ("currency", "Convert an amount of money between two currencies."),
    ("checksum", "Compute the SHA-256 checksum of a file on disk."),
    ("timezone", "Convert a time from one time zone to another."),
    ("weather", "Current weather conditions for a city."),
    ("translation", "Translate a text into another language."),
    ("qr code", "Render a QR code image for a piece of text."),
    ("password", "Generate a random strong password."),
    ("distance", "Compute the driving distance between two addresses."),
    ("stock quote", "Look up the latest stock price for a ticker symbol."),
    ("unit", "Convert a quantity between measurement units such as miles and kilometres."),
    ("holiday", "Public holidays of a country for a year."),
    ("dictionary entry", "Definition and pronunciation of an English word."),
    ("pdf page", "Extract the text of one page of a PDF document."),
    ("thumbnail", "Resize a picture into a small thumbnail."),
    ("cron expression", "Explain when a cron schedule expression fires."),
    ("regex", "Test a regular expression against sample strings."),
    ("ip address", "Geolocate an IP address to a country and city."),
    ("barcode", "Decode the barcode in a photo."),
    ("spreadsheet", "Sum a column of a spreadsheet."),
    ("voice memo", "Transcribe an audio recording to text."),
]
LOCAL_ACTIONS = [
    ("tool", "{text}"),
    ("history", "Show the history of recent {object} requests."),
    ("settings", "Change the settings used for {object} requests."),
    ("cache", "Clear the cache of {object} results."),
    ("usage", "Report how many {object} requests were made today."),
]

THESAURUS = {
    "create": ["make", "add", "open"],
    "new": ["fresh"],
    "list": ["enumerate", "show all"],
    "get": ["fetch", "retrieve"],
    "details": ["information", "info"],
    "update": ["modify", "change", "edit"],
    "delete": ["remove", "erase"],
    "permanently": ["for good"],
    "search": ["find", "look for"],
    "matching": ["that matches"],
    "archive": ["hide away"],
    "export": ["download"],
    "compute": ["calculate", "work out"],
    "convert": ["change", "turn"],
    "file": ["document"],
    "picture": ["image", "photo"],
    "photo": ["picture", "image"],
    "text": ["words"],
    "amount": ["sum"],
    "money": ["cash"],
    "random": ["arbitrary"],
    "latest": ["newest", "current"],
    "current": ["present"],
    "message": ["note"],
    "email": ["mail"],
    "ticket": ["issue"],
    "issue": ["ticket", "bug"],
    "event": ["meeting", "appointment"],
    "folder": ["directory"],
    "clear": ["wipe", "empty"],
    "recent": ["latest"],
    "report": ["tell"],
    "show": ["display"],
    "change": ["adjust"],
    "translate": ["render"],
    "transcribe": ["write down"],
}


def _tool_name(prefix: str, action: str, obj: str) -> str:
    return "_".join(part for part in (prefix, action, obj.replace(" ", "_")) if part)


def catalogue() -> list[ToolDefinition]:
    """500 definitions: 10 servers x 8 actions x 5 objects, then 20 local topics x 5."""
    tools: list[ToolDefinition] = []
    for prefix, (product, objects) in SERVERS.items():
        for obj in objects:
            for action, template in ACTIONS:
                parameters = {
                    "type": "object",
                    "properties": {
                        f"{obj.replace(' ', '_')}_id": {
                            "type": "string",
                            "description": f"the {obj}'s id",
                        },
                        "fields": {"type": "object", "description": "values to set"},
                    },
                }
                tools.append(
                    ToolDefinition(
                        name=_tool_name(prefix, action, obj),
                        description=template.format(object=obj, product=product),
                        parameters=parameters,
                    )
                )
    for topic, text in LOCAL:
        for action, template in LOCAL_ACTIONS:
            tools.append(
                ToolDefinition(
                    name=_tool_name("", topic, action)
                    if action != "tool"
                    else topic.replace(" ", "_"),
                    description=template.format(text=text, object=topic),
                )
            )
    return tools


def paraphrase(description: str, rng: random.Random) -> str:
    """``description`` said another way: a synonym or two, a word dropped, words reordered."""
    words = description.rstrip(".").replace(",", "").split()
    swapped = 0
    for position, word in enumerate(words):
        options = THESAURUS.get(word.lower())
        if options and swapped < 2 and rng.random() < 0.7:
            words[position] = rng.choice(options)
            swapped += 1
    droppable = [position for position, word in enumerate(words) if len(word) > 3]
    if len(droppable) > 2:
        del words[rng.choice(droppable)]
    if len(words) > 3:
        cut = rng.randrange(1, len(words) - 1)
        words = words[cut:] + words[:cut]  # the same words, another order
    return " ".join(words)


def queries(tools: list[ToolDefinition], count: int, *, seed: int = 7) -> list[tuple[str, str]]:
    """``count`` (query, wanted tool name) pairs from the tools' descriptions."""
    rng = random.Random(seed)
    chosen = rng.sample(tools, count)
    return [(paraphrase(tool.description, rng), tool.name) for tool in chosen]
