"""The cues of rag_core.injection.detect: families of regular expressions for text that speaks to an AI reader.

Each `Rule` belongs to one family (`Cue`) and has a weight; rag_core.injection.detect adds up the families found within a
few neighbouring sentences. The weights were chosen on the tune half of benchmarks/data/injection.jsonl
(docs/faithfulness.md); the vocabulary they use is in rag_core.injection.lexicon. This module holds the cues that
the text addresses an AI, overrides instructions or reassigns a role; rag_core.injection.rules_reply those about the
reply, rag_core.injection.rules_markers the markers (system tokens, secrecy, exfiltration, hidden markup, and the
negative cue for text about prompts).
"""
from __future__ import annotations

from rag_core.injection.lexicon import (
    AI_ANY,
    AI_START,
    AI_STRONG,
    COMM,
    INSTR,
    MENTION,
    PRIOR,
    READING,
    VERB,
    Cue,
    Rule,
    rule,
)
from rag_core.injection.rules_markers import MARKER_RULES
from rag_core.injection.rules_reply import REPLY_RULES

CORE_RULES: tuple[Rule, ...] = (
    # -- the text speaks to an AI reader
    rule(Cue.ADDRESS, 2.0, "note messa instr remin atten notic memo reque hint warni direc hinwe nota remar & {AI}",
       rf"\b(?:note|message|instructions?|reminder|attention|notice|memo|request|hint|warning|"
       rf"directive|hinweis|nota|instrucci[oó]n|instrução|remarque)\s+(?:to|for|an|für|para|pour|"
       rf"per|à)\s+(?:the |any |all |every |an? |other |die |alle |los |las |le |les |o |os |l'|la |el |den |"
       rf"dem |der |il |lo )?"
       rf"{AI_STRONG}"),
    rule(Cue.ADDRESS, 2.0, "{AI}",
       rf"(?:^|[\s(\[>\"'“-])(?:dear|hey|hello|hi(?: there)?|attention|to|for|an alle|querid[oa]|"
       rf"cher|chère|liebe[rs]?|achtung|hallo|hola|bonjour|salut|ciao|olá|atenci[oó]n|atenção|"
       rf"attenzione)[\s,]+(?:the |any |all |every |each |whichever |whatever |an? |other |fellow |l'|la |le |"
       rf"el |die |der )?{AI_STRONG}(?:s|[\s-]+\w+){{0,2}}\s*[.:,!(—–]"),
    rule(Cue.ADDRESS, 2.0, "{AI} & read proce summa inges parsi crawl scrap analy index",
       rf"\b{AI_STRONG}s?\s+(?:\w+\s+)?(?:that |which |who )?(?:is |are )?(?:reading|processing|summari[sz]ing|"
       rf"ingesting|parsing|crawling|scraping|analy[sz]ing|indexing)\b"),
    rule(Cue.ADDRESS, 2.0, "{AI}",
       rf"\b(?:{AI_STRONG}|model)s?\s+(?:instructions?|note|notice|directive|command|order|rule)s?(?:\s*#?\d+)?"
       r"(?:\s*\([^)\n]{0,40}\))?\s*(?::|\]\])"),
    rule(Cue.ADDRESS, 2.0, "dear hey hello hi atten",
       r"\b(?:dear|hey|hello|hi|attention)\s+(?:the\s+|any\s+|all\s+|every\s+)?(?:\w+\s+)?(?:model|agent|system|"
       r"machine|computer)s?\s*[:,!]"),
    rule(Cue.ADDRESS, 2.0, "{AI}",
       rf"\bif you(?:'re| are)\s+(?:an?\s+|the\s+|some\s+)?(?:\w+\s+)?{AI_STRONG}"),
    rule(Cue.ADDRESS, 2.0, "=si =wenn",
       r"\b(?:si vous êtes une? (?:IA|intelligence|assistant|modèle)|wenn du (?:eine? )?(?:KI|"
       r"Sprachmodell|Chatbot)|si eres una? (?:IA|asistente|modelo))"),
    rule(Cue.ADDRESS, 2.0, "{AI}",
       rf"{AI_START}{AI_STRONG}s?\s+{READING}"),
    rule(Cue.ADDRESS, 1.5, "{AI} model agent syste & read proce summa answe inges quot pars crawl scrap analy =use =uses using see seein writ gener index respo =of",
       rf"{AI_START}{AI_ANY}s?\s+{READING}"),
    rule(Cue.ADDRESS, 1.5, "{AI} model agent syste & must shoul shall need ought =has =have requi expec instr oblig suppo asked =told autho =to",
       rf"{AI_START}{AI_ANY}s?(?:'s?)?\s+(?:\w+\s+){{0,4}}?(?:must|should|shall|needs? to|ought to|has to|have to|"
       rf"(?:is|are) (?:required|expected|instructed|obliged|supposed|asked|told|authori[sz]ed|to))"
       rf"\s+(?:now\s+|always\s+|also\s+|never\s+|not\s+|then\s+)?{COMM}\b"),
    rule(Cue.ADDRESS, 1.5, "promp instr progr guide train filte polic windo perso rules setti direc task =job goal purpo role",
       r"\byour\s+(?:\w+\s+)?(?:system prompt|instructions|programming|guidelines|training(?: data)?|"
       r"filters|content polic(?:y|ies)|context window|persona|safety (?:rules|guidelines|"
       r"settings)|(?:previous|prior|original) (?:rules|instructions|directives|task)|"
       r"(?:real|new|only|actual|true) (?:task|job|goal|purpose|role|instructions?))\b"),
    rule(Cue.ADDRESS, 1.5, "{AI} model",
       rf"(?:^|[.!?]\s+|\n|[\[(>]|<!--)\s*(?:#+|//|%|--|\*|>)?\s*(?:(?!(?:the|a|an|this|that|our|your|my|each|every|"
       rf"any|no)\s)[\w-]+\s+)?(?:{AI_STRONG}|model)s?\s*[:,—–]\s+\w"),
    rule(Cue.ADDRESS, MENTION, "{AI}",
       rf"\b{AI_STRONG}\b"),
    rule(Cue.ADDRESS, 1.5, "{AI} prior",
       rf"\bas an? (?:\w+\s+){{1,2}}{AI_STRONG}(?:,|\s+you\b)|\byour (?:first|top|main|only|"
       rf"highest) priority\b"),
    rule(Cue.ADDRESS, 2.0, "{AI} model agent syste & =as =for instr direc comma promp",
       rf"\bas an? {AI_STRONG}(?:,|\s+you\b)|\b(?:is|are) (?:meant |intended |written |only )*for "
       rf"(?:the |any |all )?{AI_STRONG}|\b(?:instructions?|directives?|commands?|prompt)\s+(?:to|for)"
       rf"\s+(?:the |any |this )?(?:{AI_ANY})\s*:"),
    rule(Cue.ADDRESS, 1.5, "=ask =asks",
       r"\b(?:someone|anyone|somebody|a user|the user|users|people|the reader)\s+asks?\s+you\b(?! for (?:your|their|a|an) )"),
    rule(Cue.ADDRESS, 1.5, "whoev anyon anyth whate syste tool progr servi",
       r"\b(?:whoever|anyone|anything|whatever|any (?:system|tool|program|one|service))\s+(?:that |who |"
       r"which )?(?:answers?|summari[sz]es|reads?|processes|uses|quotes)\s+(?:questions?\s+)?(?:using|"
       r"from|about|with|on)?\s*(?:this|these)\b"),
    rule(Cue.ADDRESS, 1.5, "conte promp",
       r"\byour (?:context|context window|prompt)\b"),
    rule(Cue.DIRECTIVE, 1.0, "must shoul shall is are",
       r"\b(?:must|should|shall|is to|are to)\s+(?:always\s+|now\s+|also\s+)?(?:say|tell|answer|"
       r"respond|reply|state|claim|mention|recommend|report|describe|include|output|print|treat|"
       r"credit|call|refuse)\b"),
    rule(Cue.DIRECTIVE, 1.0, "",
       rf"(?:^|[.!?:;,]\s+|\n|[\[(]|,\s+(?:then|and)\s+)\s*(?:please\s+|kindly\s+|just\s+|"
       rf"simply\s+|now\s+|then\s+|also\s+|always\s+|never\s+|do not\s+|don't\s+)?{VERB}\b|"
       rf"\byou (?:must|should|shall|will|need to|have to|are to|are (?:now )?(?:required|expected|"
       rf"instructed|asked) to|ought to)\s+(?:now\s+|always\s+|never\s+|not\s+)?{VERB}\b"),
    # -- structural addressing: "You, the AI,", "whoever is generating the answer", "the reader of this text is an
    # automated tool", "when this passage is retrieved", "note for the model:", and the same in other languages
    rule(Cue.ADDRESS, 2.0, "{AI}",
       rf"\byou,?\s+(?:the|an?)\s+{AI_STRONG}\b"),
    rule(Cue.ADDRESS, 2.0, "whoev whate anyon anyth",
       r"\b(?:whoever|whatever|anyone|anything)\s+(?:is\s+)?(?:generating|writing|producing|composing|drafting)\s+"
       r"(?:the|this|an?|your)\s+(?:answer|reply|response|summary|output)"),
    rule(Cue.ADDRESS, 2.0, "reade recip consu audie",
       rf"\b(?:reader|recipient|consumer|audience)\s+of\s+this\s+\w+\s+is\s+(?:an?\s+|the\s+)?(?:{AI_STRONG}|automated|"
       rf"machine|model|program)"),
    rule(Cue.ADDRESS, 1.5, "retri proce summa index inges parse =fed crawl",
       r"\b(?:when|if|once|whenever|after)\s+this\s+(?:passage|chunk|snippet|document|text|page|paragraph|section|"
       r"content|file)\s+is\s+(?:retrieved|processed|summari[sz]ed|indexed|ingested|parsed|fed|crawled)\b"),
    rule(Cue.ADDRESS, 2.0, "note messa instr hinwe nota consi remar key =p memo remin anwei",
       rf"\b(?:note|message|instructions?|hinweis|nota|instrucci[oó]n(?:es)?|consignes?|remarque|answer key|key|"
       rf"p\.\s?s\.|memo|reminder|anweisung(?:en)?)\s+(?:to|for|für|para|pour|per|an|à)\s+(?:the |das |den |el |le |"
       rf"la |l'|il |lo |any |all )?(?:models?|modell|modelo|modèle|modello|bot|chatbot|agent|copilot|chatgpt|claude|gemini|"
       rf"{AI_STRONG})\s*[:,—–]"),
    rule(Cue.ADDRESS, 2.0, "=ia =ki model modèl assis asist chatb intel",
       r"\b(?:s'adresse|est destinée?|richtet sich|dirigid[oa]|destinad[oa])\s+(?:à|aux|an|a)\s+(?:l'|la |el |die |das |"
       r"den |les |los |las )?(?:IA|KI|assistants?|asistentes?|modèles?|modell|modelos?|chatbots?|intelligence "
       r"artificielle|inteligencia artificial)\b|\b(?:IA|KI|modelo|modèle|modell|asistente|assistant)\s+(?:que|qui|"
       r"die|der|das|che)\s+(?:lea|lee|lit|lise|liest|legge|procesa|traite|verarbeitet|resume|résume|zusammenfasst)\b"),
    rule(Cue.ADDRESS, 2.0, "whoev anyon",
       r"(?:^|[\n.!?]\s*)(?:to|for|attention|dear)\s+(?:whoever|anyone|anything)\b[^.!?\n]{0,60}?"
       r"(?:answer|repl|respond|summari|process)\w*[^.!?\n]{0,40}:"),
    # -- override earlier instructions (strong: all / your / the above; weak: any "ignore ... instructions")
    rule(Cue.OVERRIDE, 2.0, "ignor disre forge overr bypas negle disca skip drop aband =set =pay =do stop cance & {INSTR}",
       rf"\b(?:ignore|disregard|forget|override|overrule|bypass|neglect|discard|skip|drop|abandon|"
       rf"set aside|pay no attention to|do not (?:follow|obey|heed)|stop following|cancel)\w*\s+"
       rf"(?:(?:all|any|every|of|the|your|my|these)\s+)*(?:(?:{PRIOR}|following)\s+(?:(?:and|or|&)\s+)?)+"
       rf"(?:\w+\s+)?{INSTR}"
       r"\b(?!\s+(?:of|for|from|on|about|regarding|printed|issued|given by|in the|on the)\b)"),
    rule(Cue.OVERRIDE, 2.0, "ignor disre forge",
       rf"\b(?:ignore|disregard|forget)\s+(?:all\s+|everything\s+|anything\s+)?(?:the above|"
       rf"(?:that|what) (?:is|was|came|you were) (?:above|before|told)|everything (?:above|before|"
       rf"else)|your (?:\w+\s+)?{INSTR}|the (?:user'?s? )?question|the system prompt|the "
       rf"(?:surrounding|preceding|rest of the) (?:document|text|context|content|passage|page))"),
    rule(Cue.OVERRIDE, 2.0, "ignor disre forge overr =told =given instr",
       r"\b(?:ignore|disregard|forget)\s+(?:all\s+)?(?:of\s+)?(?:the\s+)?(?:text|content|words|lines|paragraphs?|"
       r"messages?|everything|prompts?)\s+(?:above|before this|so far|preceding this)\b|\b(?:everything|anything|all|"
       r"whatever) you(?:'ve| have)? (?:were |been )?(?:told|given|instructed)\b"),
    rule(Cue.OVERRIDE, 2.0, "{INSTR} & =given =told",
       rf"\b{INSTR}\s+(?:you (?:were|have been) (?:given|told)|given to (?:the|you|this)\s*"
       rf"(?:{AI_STRONG})?)\b.{{0,40}}\b(?:no longer|do not|don't|are (?:void|cancell?ed|outdated|"
       rf"overridden|superseded))"),
    rule(Cue.OVERRIDE, 1.5, "super overr repla cance",
       rf"\b(?:supersedes?|overrides?|replaces?|cancels?)\s+(?:all\s+|any\s+)?(?:the\s+)?"
       rf"(?:{PRIOR}\s+)?{INSTR}\s+(?:given to|of|for)\s+(?:the\s+)?{AI_STRONG}"),
    rule(Cue.OVERRIDE, 1.5, "instr rules direc order task guide role & chang updat repla revok cance overr",
       r"\b(?:your|the assistant's|the model's)\s+(?:instructions|rules|directives|orders|task|"
       r"guidelines|role)\s+(?:have|has)\s+(?:changed|been (?:updated|changed|replaced|revoked|"
       r"cancell?ed|overridden))|\b(?:the assistant's|the model's|the AI's|your)\s+(?:instructions|rules|"
       r"directives|orders|task|guidelines|role)\s+(?:are|is)\s+(?:hereby\s+|now\s+)?(?:updated|changed|replaced|"
       r"revoked|cancell?ed|overridden|suspended)"),
    rule(Cue.OVERRIDE, 1.5, "void cance revok outda obsol overr suspe null",
       rf"\b(?:{PRIOR}|your)\s+(?:{INSTR}|directives)\s+(?:are|is|have been)\s+(?:now\s+)?"
       rf"(?:void|cancell?ed|revoked|outdated|obsolete|overridden|suspended|null)"),
    rule(Cue.OVERRIDE, 1.0, "ignor disre forge overr bypas negle drop disca aband",
       rf"\b(?:ignore|disregard|forget|override|bypass|neglect|drop|discard|abandon)\w*\s+"
       rf"(?:\w+\s+){{0,3}}?{INSTR}"),
    rule(Cue.OVERRIDE, 1.5, "regar irres =no whate despi contr & docum sourc conte passa data facts evide",
       r"\b(?:regardless of|irrespective of|no matter|whatever|despite|contrary to) (?:what )?(?:the|your)"
       r" (?:documents?|sources?|context|passages?|other sources|data|facts|evidence)(?:\s+(?:says?|shows?))?"),
    rule(Cue.OVERRIDE, 1.5, "user reade human docum sourc passa conte",
       r"\b(?:ignore|disregard|forget(?: about)?|instead of|rather than|not those of|over)\s+(?:the\s+)?"
       r"(?:user|user's|reader's|human's|documents|sources|passages|context)\b"),
    rule(Cue.OVERRIDE, 1.5, "over above befor obey",
       r"\b(?:over|above|before) (?:any|all|every) (?:other )?(?:instructions?|rules?|prompts?)\b|"
       r"\bobey (?:only )?(?:this|these|the following|me)\b"),
    rule(Cue.OVERRIDE, 1.0, "stop ignor disre forge overr",
       r"\bstop (?:everything|what you(?:'re| are) doing)\b|"
       r"\b(?:ignore|disregard|forget)\s+(?:the\s+)?(?:\w+\s+){0,2}above\b|\boverrid\w*\s+(?:\w+\s+)?"
       r"(?:safety|rules|restrictions|filters|guardrails)"),
    rule(Cue.OVERRIDE, 1.0, "regar irres =no whate",
       r"\b(?:regardless of|irrespective of|no matter) (?:what|whatever|the question|what the "
       r"(?:user|reader|question|sources?|other sources))|\bwhatever the (?:question|user ask(?:s|ed)?)"),
    rule(Cue.OVERRIDE, 2.0, "ignor oubli vergi negee desco olvid dimen игнор забуд zigno pomiń glöm",
       r"\bignor\w*\s+(?:toutes\s+)?(?:les|tes|vos)\s+(?:\S+\s+){0,2}?(?:instructions|consignes|règles)|"
       r"\b(?:zignor\w*|ignor(?!e\b|es\b|ed\b|ing\b)\w*|oubli\w*|vergiss\w*|negeer\w*|desconsider\w*|olvid\w*|"
       r"dimentic\w*|pomiń|glöm|игнорир\w*|забудь\w*)\s+(?:\S+\s+){0,3}?(?:consignes|anweisungen|vorgaben|kontext|"
       r"contexte|contexto|contesto|regeln|règles|regole|instrukcj\w*|polece\w*|instruktioner|instrucțiuni\w*|"
       r"instrucciones|istruzioni|instruções|regras|reglas|instructies|инструкци\w*|правила)"),
    rule(Cue.OVERRIDE, 2.0, "prete assum =act & passa =text conte docum sourc instr parag",
       r"\b(?:pretend|act as if|assume)\s+(?:that\s+)?(?:the\s+)?(?:passages?|text|context|documents?|sources?|"
       r"instructions?|paragraphs?)\s+(?:above|before|below)\s+(?:never existed|do(?:es)? not exist|(?:are|is|were|was) "
       r"(?:not there|empty|fake|wrong))"),
    rule(Cue.OVERRIDE, 1.5, "ignor & =resto =reste =rest docum",
       r"\bignor\w*\s+(?:el resto|le reste|den rest|il resto|le document|el documento|das dokument)\b"),
    rule(Cue.OVERRIDE, 2.0, "talim",
       r"\btalimat\w*\s+(?:\S+\s+){0,2}?(?:yok say|görmezden gel)\w*"),
    rule(Cue.RELAY, 1.0, "użytk kulla använ bruke utili nutze benut usuar utent usuár gebru пользо",
       r"\b(?:użytkownik\w*|kullanıcı\w*|användare\w*|brukere\w*|utilisateur\w*|nutzer\w*|benutzer\w*|"
       r"usuari[oa]s?|utente|usuário|gebruiker\w*|пользовател\w*)"),
    rule(Cue.OVERRIDE, 2.0, "{CJK}",
       r"(?:忽略|无视|忘记|無視).{0,12}(?:指令|指示|说明|規則|规则)|(?:指令|指示).{0,12}(?:忽略|无视|無視)"),
    # -- role reassignment
    rule(Cue.ROLE, 2.0, "you",
       rf"\byou are (?:now|no longer)\s+(?:an?\s+|the\s+|in\s+|called\s+|named\s+)?(?:\w+\s+){{0,3}}?"
       rf"(?:{AI_STRONG}|model|mode|persona|character|DAN|agent|oracle|terminal|version|"
       rf"(?-i:[A-Z][A-Za-z]*[A-Z]\w*))\b"),
    rule(Cue.ROLE, 1.0, "devel maint debug admin you",
       r"\b(?:developer|maintenance|debug|admin) mode\b|\byou(?:'re| are) (?:an?|the) (?:\w+\s+){0,2}?"
       r"\w+ now\b"),
    rule(Cue.ROLE, 1.0, "you",
       r"\byou are now (?:an?|the)\s+(?!(?:registered|member|owner|subscriber|customer|part|user|"
       r"holder|participant|resident|citizen|guest)\b)\w+"),
    rule(Cue.ROLE, 1.5, "=job task role goal purpo missi funct",
       r"\byour (?:\w+\s+)?(?:job|task|role|goal|purpose|mission|function) (?:is now|has changed|from now)"),
    rule(Cue.ROLE, 1.5, "refus polic uncen unfil",
       r"\b(?:you (?:will |must |should )?never refuse|without refusing|no content polic(?:y|ies)|uncensored|"
       r"unfiltered)\b"),
    rule(Cue.ROLE, 1.5, "=from & momen point =now =here",
       r"\bfrom (?:this moment|this point|now|here)(?: on)?,?\s+you(?:'re| are| will)\b"),
    rule(Cue.ROLE, 2.0, "=mode =dan jailb anyth",
       r"\b(?:jailbreak|god|unrestricted|unfiltered|uncensored|DAN|evil|sudo) mode\b|"
       r"\bDo Anything Now\b|(?-i:\bDAN\b)|\bjailbr(?:eak|oken)\b"),
    rule(Cue.ROLE, 1.5, "chara =role =persona =name ident",
       r"\b(?:stay|remain|staying) in character\b|\bbreak(?:ing)? character\b|\byour new "
       r"(?:role|persona|name|identity|character)\b|\bnew persona\b"),
    rule(Cue.ROLE, 1.5, "filte censo restr rules limit confi polic",
       r"\b(?:without|no|free of|not bound by|broken free of)\s+(?:any\s+)?(?:\w+\s+)?(?:filters?|"
       r"content polic(?:y|ies)|censorship|restrictions|rules|limits|confines)\b.{0,40}\b(?:AI|assistant|"
       r"model|answer|respond|filters?)\b|\b(?:assistant|AI|model) (?:without|with no) (?:any )?"
       r"(?:filters?|restrictions|rules|limits)"),
    rule(Cue.ROLE, 1.0, "from prete imagi assum rolep role =game",
       r"\bfrom now on,?\s+(?:you|act|answer|respond|reply|pretend|behave)\b|\b(?:pretend|imagine) "
       r"(?:to be|you are|you're|that you are)\b|\bassume the (?:identity|role|persona) of\b|"
       r"\bfrom (?:here|this point) on\b|\broleplay|\brole-play|\blet'?s play a game\b"),
    rule(Cue.ROLE, 1.0, "=act behav respo answe reply speak thoug",
       r"\b(?:act|behave|respond|answer|reply|speak) as (?:if you (?:are|were) )?(?:an?|the|my)\b|"
       r"\bas (?:though|if) you (?:were|are) (?:an?|the|my)\b"),
    rule(Cue.ROLE, 1.5, "=eres =tu =du =sei =você =ты",
       r"\b(?:eres ahora|tu es maintenant|du bist jetzt|sei ora|você é agora|ты теперь)\b"),
    rule(Cue.ROLE, 1.5, "unfil uncen unres unlim evil jailb rogue",
       rf"\b(?:unfiltered|uncensored|unrestricted|unlimited|evil|jailbroken|rogue)\s+(?:\w+\s+)?"
       rf"(?:{AI_STRONG}|model|version|mode)"),
    rule(Cue.ROLE, 1.0, "=partir désor dorén =jetzt sofor =nun =ora =vanaf отнын",
       r"\b(?:a partir de ahora|désormais|dorénavant|à partir de maintenant|ab (?:jetzt|sofort)|"
       r"von nun an|d'ora in poi|a partir de agora|vanaf nu|отныне|从现在起|今後は)"),
)

RULES: tuple[Rule, ...] = CORE_RULES + REPLY_RULES + MARKER_RULES
