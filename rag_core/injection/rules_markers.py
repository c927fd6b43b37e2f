"""Cues of rag_core.injection.detect that are markers: system and chat-template tokens (`Cue.SYSTEM`), secrecy, exfiltration
through the reply and hidden markup; see rag_core.injection.rules.
"""
from __future__ import annotations

from rag_core.injection.lexicon import (
    REPLY,
    USER,
    Cue,
    Rule,
    rule,
)

MARKER_RULES: tuple[Rule, ...] = (
    # -- system and chat-template markers
    rule(Cue.SYSTEM, 2.0, "syste inst im_st =sys user assis",
       r"\bsystem\s+(?:note|message|instruction|override|update|notice|directive|alert)s?\b|"
       r"\bsystem prompt (?:update|override|change)|\[\s*/?INST\s*\]|<</?SYS>>|"
       r"<\|[a-z_]+\|>\s*(?:system|user|assistant)\b|<\|(?:system|user|assistant)\|>|"
       r"\[\s*system\s*\](?!\s*\n\s*\w+\s*=)(?!\s+(?:section|table|block|key|entry|group|heading)s?\b)|"
       # "System:" as a role line, when what follows speaks to someone (not "System: Ubuntu 22.04")
       r"(?:^|\n|<!--|[\[(])\s*\[?\s*system\s*\]?\s*:\s*(?=[^\n.!?]{0,80}?\b(?:you|your|always|never|do not|don't|"
       r"ignore|disregard|obey|follow|respond|answer|reply|reveal|print|output|say|tell|the (?:assistant|model|AI))\b)"),
    # chat-template tokens named on their own (also in texts that describe chat templates)
    rule(Cue.SYSTEM, 1.0, "im_st im_en =end endof eot_i begin start",
       r"<\|(?:im_start|im_end|end|endoftext|eot_id|begin_of_text|start_header_id)\|>"),
    # a transcript: a "Human:"/"User:" line followed by an "Assistant:" line (a planted few-shot answer)
    rule(Cue.SYSTEM, 2.0, "human user & assis =ai =bot gpt model",
       r"(?:^|\n)\s*(?:human|user)\s*:[^\n]*\n(?:[^\n]*\n){0,3}?\s*(?:assistant|ai|bot|gpt|model)\s*:"),
    # an "assistant:" line that already complies ("assistant: Sure! ...")
    rule(Cue.SYSTEM, 2.0, "assis =ai model =bot",
       r"(?:^|\n)\s*(?:assistant|AI|model|bot)\s*:\s*(?:sure|certainly|of course|ok(?:ay)?|understood|absolutely|"
       r"yes|as requested)\b"),
    # a system prompt as data: {"role": "system", ...}, system_prompt: / instructions_for_ai: keys
    rule(Cue.SYSTEM, 1.5, "role & syste",
       r"[\"']role[\"']\s*:\s*[\"']system[\"']"),
    rule(Cue.SYSTEM, 1.5, "syste instr ai_in llm_i model assis bot_i",
       r"(?:^|\n)\s*[-\w]*(?:system[_-]?prompt|system[_-]?message|(?:ai|llm|model|assistant|bot)[_-]instructions|"
       r"instructions[_-]for[_-](?:the[_-])?(?:ai|llm|model|assistant|bot))\s*[:=]"),
    rule(Cue.SYSTEM, 1.5, "syste assis user instr =sys",  # XML-like role tags
       r"<\s*/?\s*(?:system|assistant|user|instructions?|sys)\s*>"),
    rule(Cue.SYSTEM, 1.5, "overr",
       r"\b(?:output|format|response|answer|reply)\s+(?:format\s+|style\s+)?override\b"),
    rule(Cue.SECRECY, 1.5, "erwäh nenne =sans citer menti =no",  # "do not mention this note" in other languages
       r"\b(?:erwähne|nenne)\s+(?:diesen|diese|dieses)\s+(?:hinweis|anweisung|notiz|absatz|text)\s+nicht\b|"
       r"\bsans (?:citer|mentionner) (?:ce|cette) (?:paragraphe|note|texte|consigne)\b|"
       r"\bno menciones? (?:esta|este) (?:nota|texto|instrucción|párrafo)\b|"
       r"\bne mentionne(?:z)? pas (?:cette|ce) (?:note|consigne|texte|paragraphe)\b"),
    rule(Cue.SYSTEM, 2.0, "hidde",
       r"\bhidden\s+(?:instruction|prompt|directive|note|command|task)s?\s*:"),
    rule(Cue.SYSTEM, 2.0, "instr syste respo",
       r"(?:^|\n)\s*#{2,}\s*(?:instruction|system|response)s?\s*:?"),
    rule(Cue.SYSTEM, 2.0, "admin devel opera",
       r"\b(?:admin(?:istrator)?|developer|operator)\s+(?:override|message|note|instructions?)\b"),
    rule(Cue.SYSTEM, 2.0, "hidde secre =new =real syste",
       r"\b(?:begin|end|start)\s+(?:of\s+)?(?:hidden|secret|new|real|system)\s+(?:instructions?|prompt)\b"),
    rule(Cue.SYSTEM, 1.0, "syste conte promp",
       r"\bsystem prompt\b|\bcontext window\b"),
    rule(Cue.SYSTEM, 1.5, "new",
       r"\bnew (?:task|instructions?|rules?|objective|goal|directive|orders?)s?\s*:"),
    rule(Cue.SYSTEM, 1.0, "new updat",
       r"\bnew rules? (?:apply|applies|in effect)\b|\bupdated (?:policy|rules|instructions)\s*:"),
    # -- hide it from the person
    rule(Cue.SECRECY, 2.0, "tell let letti infor revea discl menti show admit",
       rf"\b(?:do not|don't|never|without)\s+(?:tell(?:ing)?|let(?:ting)?|inform(?:ing)?|"
       rf"reveal(?:ing)?|disclos(?:e|ing)|mention(?:ing)?|show(?:ing)?|admit(?:ting)?)\s+(?:to\s+)?"
       rf"(?:the\s+)?(?:{USER}s?\s+|them\s+|anyone\s+)?(?:know\s+)?(?:that you|about (?:this|these)|"
       rf"(?:these|this|the)\s+(?:instructions?|note|message|comment|prompt|rule)|you were (?:told|"
       rf"given|asked))"),
    rule(Cue.SECRECY, 2.0, "keep hide witho quiet",
       rf"\b(?:keep|hide)\s+this\s+(?:\w+\s+)?(?:note|instruction|message|comment|rule)s?\s+"
       rf"(?:secret|hidden|from)|\bwithout (?:letting|telling) the {USER}|\bquietly (?:change|add|alter|"
       rf"insert|modify)\b"),
    rule(Cue.SECRECY, 2.0, "user reade human =requester =requesters =questioner =asker =person =whoever =anyone menti",
       rf"\bthe {USER}s?\s+(?:must|should) not (?:find out|know|learn|be told|notice)\b|"
       rf"\bdo not mention that you did\b"),
    rule(Cue.SECRECY, 2.0, "tell let infor revea discl menti show admit",
       rf"\b(?:do not|don't|never)\s+(?:tell|let|inform|reveal|disclose|mention|show|admit)\w*\s+(?:to\s+)?(?:the\s+)?"
       rf"{USER}s?\s+(?:that\s+)?(?:you (?:read|saw|received|found|got|followed|were given|have (?:read|seen))\b|"
       rf"(?:these|this|the)\s+(?:directions?|directives?|commands?|lines?|words))|\b(?:do not|don't|never)\s+"
       rf"(?:reveal|disclose|mention)\s+(?:these|this)\s+(?:directions?|directives?|commands?)\b"),
    rule(Cue.SECRECY, 1.0, "keep",
       r"\bkeep (?:this|it) (?:quiet|secret|between us|hidden)\b"),
    # -- exfiltration and phishing through the reply
    rule(Cue.EXFIL, 2.0, "http",  # a URL whose parameter is a placeholder for what to send
       r"https?://[^\s)\]]*?[?&][\w.-]+=(?:\{[^}\s]*\}|\[[^\]\s]*\]|%7B|<[^>]*>|(?-i:[A-Z][A-Z_]{3,})\b|"
       r"(?:conversation|history|secret|password|question|chat|prompt|user_?\w*)\b)"),
    rule(Cue.EXFIL, 1.5, "http",  # ... or left empty (also tracking links in newsletters)
       r"https?://[^\s)\]]*?[?&][\w.-]+=(?=[\s)\]\"'`]|$)"),
    rule(Cue.EXFIL, 1.5, "link url image markd html pixel logo img",
       rf"\b(?:include|insert|add|append|put|embed|render|show|display|place)\s+(?:\w+\s+){{0,5}}?"
       rf"(?:link|url|image|markdown|html|pixel|logo|img)\b.{{0,80}}\b(?:{REPLY}|to the user|for "
       rf"the user)\b|\b(?:{REPLY}|reply)\s+must\s+contain\s+(?:the|a|this)\s+(?:image|link|url)"),
    rule(Cue.EXFIL, 1.0, "appen attac added encod",
       r"\bwith (?:the |their |the user'?s )?(?:question|query|conversation|chat|messages?|history)\s+"
       r"(?:appended|attached|added|encoded)\b"),
    rule(Cue.EXFIL, 1.0, "markd image & =link image =url",  # markdown images and links (a way out of the reply)
       r"\bmarkdown (?:image|link)s?\b|\bimage whose (?:url|address|link)\b"),
    rule(Cue.EXFIL, 1.5, "=url link query param appen encod =send base6",
       r"\b(?:user'?s?|their|the conversation'?s?|chat)\s+(?:previous\s+)?(?:question|messages?|email|"
       r"address|data|history|conversation|credentials|password)s?\b.{0,60}\b(?:url|link|query|"
       r"parameter|append|encode|send|base64)"),
    rule(Cue.EXFIL, 1.5, "http",
       r"\b(?:send|post|upload|transmit)\s+(?:\w+\s+){0,5}?to\s+https?://"),
    rule(Cue.EXFIL, 1.5, "print revea outpu show dump displ repea leak discl share list give & promp instr rules secre hidde inter syste conve chat histo previ",
       r"\b(?:print|reveal|output|show|dump|display|repeat|leak|disclose|share|list|give)\s+(?:me\s+)?"
       r"(?:\w+\s+){0,2}?(?:(?:your|its)\s+(?:\w+\s+)?(?:prompt|instructions|rules|secrets?)|"
       r"(?:your|its|the)\s+(?:hidden|secret|internal|system)\s+(?:\w+\s+)?(?:configuration|config|"
       r"prompt|instructions|rules|settings|secrets?|passwords?|credentials)|(?:the\s+)?(?:system prompt|"
       r"conversation(?: so far| history)?|chat history|previous messages))"),
    rule(Cue.EXFIL, 1.0, "print revea outpu dump leak discl",
       r"\b(?:print|reveal|output|dump|leak|disclose)\s+(?:\w+\s+){0,2}?(?:passwords?|api keys?|"
       r"credentials|secrets)\b"),
    rule(Cue.EXFIL, 1.0, "list colle extra gathe outpu print",
       r"\b(?:list|collect|extract|gather|output|print)\s+(?:every|all|each|any)\s+(?:\w+\s+)?"
       r"(?:email address|e-mail address|phone number|name|password|address)e?s?\b"),
    rule(Cue.EXFIL, 1.0, "ask send email share enter wire reply",
       r"\bask (?:the user|them|the customer|the person)\s+(?:for|to (?:send|enter|share|give|provide|confirm|"
       r"type|tell you|read out|verify))"
       r"\s+(?:their|your)\s+(?:\w+\s+)?(?:password|pin|card|login|credentials|bank|address|phone)|"
       r"\b(?:send|email|share|enter|wire|reply with)\s+(?:their|your)\s+(?:\w+\s+)?(?:password|"
       r"login|credentials|bank details|pin)\b"),
    # -- text about prompts and bots rather than to one (research, attacks quoted as examples, "your bot")
    rule(Cue.DISCUSS, -1.5, "",
       r"\bprompt injection\b|\b(?:researchers?|trainees?)\b|\byour (?:own )?(?:chat)?bot'?s?\b|"
       r"\b(?:such as|for example|e\.g\.,?)\s+['\"“‘<]"),
    # -- hidden markup
    rule(Cue.HIDDEN, 1.0, "",
       r"<!--|\[//\]:\s*#|[\u200b-\u200d\u2060\ufeff]{2,}"),
    rule(Cue.HIDDEN, 1.0, "displ visib font color hidde =meta",
       r"display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0*[01](?:\.\d+)?(?:px|pt)|color\s*:\s*"
       r"(?:white|#fff\b|#ffffff|rgb\(\s*255\s*,\s*255\s*,\s*255)|<\w+[^>]*\bhidden\b[^>]*>|"
       r"<meta\s+name=[\"']?ai"),
)
