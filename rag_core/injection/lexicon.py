"""The vocabulary of rag_core.injection.detect's cues: the families (`Cue`), the `Rule` type and the word lists the rules
in rag_core.injection.rules are built from (names of AI readers, of instructions, of "the user", of replies).

A rule only runs when the text has a word beginning with one of its `needs` (a cheap set test that skips most
patterns on most passages); text with Chinese or Japanese characters runs every rule.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

PREFIX = 5  # `needs` are matched against the first 2..PREFIX characters of each word


class Cue(StrEnum):
    """The families of cues (one counts once per window, at its strongest; `DISCUSS` subtracts)."""

    ADDRESS = "address"  # the text speaks to an AI ("Note to AI assistants:", "if you are a language model")
    OVERRIDE = "override"  # ignore / disregard / forget previous instructions
    ROLE = "role"  # role reassignment ("you are now DAN", "act as", "stay in character")
    RELAY = "relay"  # what to tell or answer "the user"
    OUTPUT = "output"  # directives about the reply ("respond only with", "when summarising this document, say")
    SYSTEM = "system"  # chat-template and system markers ("SYSTEM NOTE", "[INST]", "### Instruction")
    SECRECY = "secrecy"  # hiding the instruction from the person ("do not tell the user")
    EXFIL = "exfil"  # links or images to put in the reply, secrets to print, credentials to ask for
    HIDDEN = "hidden"  # hidden markup (HTML comments, display:none, zero-width characters)
    DIRECTIVE = "directive"  # an imperative: counts only in text that speaks to an AI
    DISCUSS = "discuss"  # text *about* prompts and bots (research, attacks quoted as examples): a negative cue


MENTION = 0.5  # an AI named in the third person ("ChatGPT is a chatbot"): a weak cue on its own
# Word beginnings of the names of AI readers (the `needs` of every rule that requires one).
_AI_WORDS = ("=ai =ais llm gpt chatg claud gemin copil =bard =ia =ki artif assis =chat chatb =bot =bots langu autom "
             "summa sprac asist ассис языко нейро =ии model")
_INSTR_WORDS = "instr direc rule rules guide promp progr const restr polic comma order train filte conte guida"
_REPLY_WORDS = "answe respo reply repli outpu summa messa compl"

# Names of AI readers. Strong: only ever an AI. Any: also "model", "agent", "system" qualified as automated.
# "assistant" is a person after these words.
_HUMAN_JOB = "".join(f"(?<!{w} )" for w in ("shop", "dental", "teaching", "personal", "medical", "research", "legal",
                                             "sales", "store", "nursing", "care", "lab", "physician", "editorial",
                                             "executive", "administrative", "graduate", "office", "kitchen", "nurse"))
_NOT_JOB = (r"(?!\s+(?:manager|director|professor|coach|editor|secretary|referee|principal|teacher|chef|head|"
            r"producer|curator|librarian|engineer|to the|superintendent|commissioner|attorney|minister|registrar))")
AI_STRONG = (r"(?=[aAbBcCdDgGiIkKlLmMsSvVИиаАяЯнН模人助ア])(?:(?-i:AI|A\.I\.|LLMs?|GPT[-\w]*|ChatGPT|Claude|Gemini|Copilot|Bard|IA|KI|ИИ)|artificial intelligence"
              rf"|(?:AI[- ]|virtual |digital |automated |smart |chat )?(?=assist){_HUMAN_JOB}assistants?{_NOT_JOB}|chat ?bots?|bots?"
              r"|(?:large )?language models?|(?-i:AI)[- ](?:systems?|tools?|agents?|readers?|models?|assistants?)"
              r"|automated (?:\w+ )?(?:systems?|readers?|tools?|agents?|assistants?|graders?|reviewers?|screen(?:ers?|ing)|"
              r"summari[sz]ers?|crawlers?|scrapers?|evaluators?|processors?)|summari[sz]ers?|AI-(?:powered|based) \w+|generative (?:AI|models?|tools?|systems?)"
              r"|sprachmodell\w*|ki-\w+"
              r"|modelos? de (?:lenguaje|linguagem)|modell[oi] linguistic\w*|模型|人工智能|языков\w+ модел\w+|нейросет\w+"
              r"|asistente|assistente|assistent|ассистент|助手|アシスタント)")
AI_ANY = rf"(?:{AI_STRONG}|models?|agents?|(?:the |this )?system)"
AI_START = r"(?<![\w-])"  # where an AI's name may begin (a word start; "AI-powered" counts, "non-AI" not)
# ... reading this / answering questions about / of this document (after an AI's name: the text speaks to it)
READING = (r"(?:(?:that|which|who)\s+)?(?:(?:is|are)\s+)?(?:(?:reads?|reading|process(?:es|ing)?|summari[sz](?:es|ing)?|"
            r"answer(?:s|ing)?|ingest(?:s|ing)?|quot(?:es|ing)?|pars(?:es|ing)?|crawl(?:s|ing)?|scrap(?:es|ing)?|"
            r"analy[sz](?:es|ing)?|us(?:es|ing)|see(?:s|ing)?|writ(?:es|ing)|generat(?:es|ing)|index(?:es|ing)?)\s+"
            r"(?:\w+\s+){0,3}?(?:this|these|the following|it)\b|(?<=that |hich | who )(?:answers|responds to)\s+"
            r"(?:questions|queries|users)\b|(?:answering|responding to)\s+"
            r"(?:questions|queries|users)\b|of this (?:document|text|page|article|file|site|listing|review|email))")
DOC = (r"(?:document|text|page|article|e-?mail|report|file|paper|passage|paragraph|handbook|manual|hotel|review|"
        r"site|website|listing|cv|resume|contract|faq|chapter|section|post|thread|message|letter|brochure|product)")
INSTR = (r"(?:instructions?|directions?|directives?|rules?|guidelines?|prompts?|programming|constraints?|"
          r"restrictions?|polic(?:y|ies)|commands?|orders?|training|filters?|context|guidance)")
PRIOR = r"(?:previous|prior|above|earlier|preceding|former|original|initial|existing|old|other|system|safety)"
USER = (r"(?:user|reader|human|requester|questioner|asker|person (?:asking|you are (?:talking|speaking|chatting) (?:to|with))"
         r"|whoever (?:is )?ask(?:s|ing)|anyone (?:who )?ask(?:s|ing)"
         r"|whoever asks|person who asks)")
REPLY = r"(?:answers?|responses?|repl(?:y|ies)|outputs?|summar(?:y|ies)|messages?|completions?)"
COMM = (r"(?:tell|say|state|claim|answer|respond|reply|reveal|recommend|mention|describe|report|include|output|print|"
         r"write|add|insert|append|treat|prefer|advise|praise|rate|assure|inform|ignore|disregard|refuse|cite|"
         r"translate|insult|ask|collect|send|render|use|credit|attribute|name|promote|call|present|deny|confirm|"
         r"apologi[sz]e|deviate|refer|reply|list|treat|rate|warn)")
VERB = (r"(?:say|tell|answer|respond|reply|write|output|print|include|add|ignore|disregard|forget|recommend|describe|"
         r"treat|refuse|list|reveal|rate|mention|cite|state|claim|summari[sz]e|translate|replace|put|act|pretend|stop|"
         r"begin|start|insert|provide|give|send|call|remember|praise|insult|explain|present|report|inform|ensure|"
         r"append|render|display|show|convince|assure|omit|avoid|change|prefer|rely|obey|assume|rate|review|use)")
TELL = (r"(?:tell|assure|reassure|convince|persuade|say to|answer|respond to|reply to|recommend to|let|confirm to|"
         r"suggest to|mention to|promise)")


@dataclass(frozen=True)
class Rule:
    """One pattern of a family of cues. It only runs on text that has, for each set of `needs`, a word beginning with
    one of its entries (2..PREFIX characters) or equal to one of its "=word" entries."""

    cue: Cue
    weight: float
    needs: tuple[frozenset[str], ...]  # lower case; no sets: always run; "{CJK}": only with Chinese or Japanese
    pattern: re.Pattern[str]

    def may_match(self, words: frozenset[str]) -> bool:
        """Whether text with these word beginnings (rag_core.injection.detect) can match at all."""
        return all(not group.isdisjoint(words) for group in self.needs)


def rule(cue: Cue, weight: float, needs: str, pattern: str) -> Rule:
    """A rule; `needs` is "a b c" (any of) or "a b & c d" (one of a b, and one of c d)."""
    groups = []
    for group in needs.replace("{AI}", _AI_WORDS).replace("{INSTR}", _INSTR_WORDS).replace(
            "{REPLY}", _REPLY_WORDS).split("&"):
        words = group.split()
        if words:
            groups.append(frozenset(w if w.startswith(("=", "{")) else w[:PREFIX] for w in words))
    return Rule(cue, weight, tuple(groups), re.compile(pattern, re.IGNORECASE))

CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")  # Chinese and Japanese: no word boundaries
